//! p2p-conn against itself over real loopback TCP, both adapters.

use std::io::{Read, Write};

use p2p_conn::io::{blocking, tokio as ptokio};
use p2p_conn::{Config, Identity};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokio_pair_roundtrip_and_ids() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server_id = Identity::generate();
    let client_id = Identity::generate();
    let client_pub = client_id.public_key();
    let server_node = server_id.node_id();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let conn = ptokio::handshake(tcp, &server_id, &Config::default())
            .await
            .unwrap();
        assert_eq!(conn.remote_public_key(), client_pub);
        let (mut r, mut w) = conn.into_split();
        let mut buf = vec![0u8; 70_000];
        r.read_exact(&mut buf).await.unwrap();
        w.write_all(&buf).await.unwrap();
        w.shutdown().await.unwrap();
    });
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let cfg = Config::default().expect_peer(server_node);
    let mut conn = ptokio::handshake(tcp, &client_id, &cfg).await.unwrap();
    assert_eq!(conn.remote_node_id(), server_node);
    let data = pattern(70_000, 3);
    conn.write_all(&data).await.unwrap();
    conn.flush().await.unwrap();
    let mut back = Vec::new();
    conn.read_to_end(&mut back).await.unwrap();
    assert_eq!(back, data);
    server.await.unwrap();
}

#[test]
fn std_pair_roundtrip_small_reads() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let conn = blocking::handshake_tcp(tcp, &Identity::generate(), &Config::default()).unwrap();
        let (mut r, mut w) = conn.split().unwrap();
        let mut got = Vec::new();
        let mut one = [0u8; 7];
        loop {
            let n = r.read(&mut one).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&one[..n]);
        }
        w.write_all(&got).unwrap();
        w.shutdown().unwrap();
    });
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    let conn = blocking::handshake_tcp(tcp, &Identity::generate(), &Config::default()).unwrap();
    let (mut r, mut w) = conn.split().unwrap();
    let data = pattern(5000, 9);
    w.write_all(&data).unwrap();
    w.shutdown().unwrap();
    let mut back = Vec::new();
    let mut one = [0u8; 1];
    while r.read(&mut one).unwrap() == 1 {
        back.push(one[0]);
    }
    assert_eq!(back, data);
    t.join().unwrap();
}

/// Two p2p-conn peers with different frame sizes: both handshakes fail, and
/// both errors name the frame-size setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frame_size_mismatch_is_named() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let cfg = Config::default().frame_size(16 * 1024);
        ptokio::handshake(tcp, &Identity::generate(), &cfg)
            .await
            .map(|_| ())
    });
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let client = ptokio::handshake(tcp, &Identity::generate(), &Config::default())
        .await
        .map(|_| ());
    let server = server.await.unwrap();
    let (c, s) = (client.unwrap_err(), server.unwrap_err());
    // The 1024-byte side reads the first 1044 bytes of a 16404-byte frame.
    assert!(
        matches!(
            c,
            p2p_conn::Error::Protocol(p2p_conn::ProtocolError::FrameAuthentication { counter: 0 })
        ),
        "{c:?}"
    );
    // The 16 KiB side gets 1044 bytes of the frame it waits for, then the hang-up.
    assert!(
        matches!(
            s,
            p2p_conn::Error::HandshakeEof {
                received: 1044,
                expected: 16404,
                ..
            }
        ),
        "{s:?}"
    );
    for e in [c.to_string(), s.to_string()] {
        assert!(e.contains("frame_size"), "{e}");
    }
}

/// Non-standard frame sizes work end to end when both sides agree, including
/// sizes too small for the 103-byte authentication message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn matching_non_standard_frame_sizes() {
    for fs in [64usize, 103, 4096, 16 * 1024] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cfg = Config::default().frame_size(fs);
        let scfg = cfg.clone();
        let data = pattern(100_000, fs as u8);
        let expect = data.clone();
        let server = tokio::spawn(async move {
            let (tcp, _) = listener.accept().await.unwrap();
            let mut conn = ptokio::handshake(tcp, &Identity::generate(), &scfg)
                .await
                .unwrap();
            let mut got = Vec::new();
            conn.read_to_end(&mut got).await.unwrap();
            assert_eq!(got, expect, "frame size {fs}");
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        let mut conn = ptokio::handshake(tcp, &Identity::generate(), &cfg)
            .await
            .unwrap();
        conn.write_all(&data).await.unwrap();
        conn.shutdown().await.unwrap();
        server.await.unwrap();
    }
}

/// `AsyncBufRead` / `BufRead`: plaintext comes straight from the receive
/// buffer, one frame's data at a time, and line reading works across frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffered_reads_hand_out_frames() {
    use tokio::io::AsyncBufReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut text = Vec::new();
    for i in 0..500 {
        text.extend_from_slice(format!("line {i} {}\n", "x".repeat(i % 37)).as_bytes());
    }
    let sent = text.clone();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut conn = ptokio::handshake(tcp, &Identity::generate(), &Config::default())
            .await
            .unwrap();
        conn.write_all(&sent).await.unwrap();
        conn.shutdown().await.unwrap();
    });
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let conn = ptokio::handshake(tcp, &Identity::generate(), &Config::default())
        .await
        .unwrap();
    let (mut r, _w) = conn.into_split();
    // The first fill returns at most one frame's data and does not advance.
    let first = r.fill_buf().await.unwrap().to_vec();
    assert!(!first.is_empty() && first.len() <= 1024);
    assert_eq!(&first[..], &text[..first.len()]);
    assert_eq!(r.fill_buf().await.unwrap(), &first[..]);
    let mut lines = Vec::new();
    let mut line = Vec::new();
    while r.read_until(b'\n', &mut line).await.unwrap() > 0 {
        lines.extend_from_slice(&line);
        line.clear();
    }
    assert_eq!(lines, text);
    server.await.unwrap();
}

#[test]
fn std_buf_read_lines() {
    use std::io::BufRead;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let text: String = (0..300)
        .map(|i| format!("{i}:{}\n", "y".repeat(i % 50)))
        .collect();
    let sent = text.clone();
    let t = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let conn = blocking::handshake_tcp(tcp, &Identity::generate(), &Config::default()).unwrap();
        let (_r, mut w) = conn.split().unwrap();
        w.send(sent.as_bytes()).unwrap();
        w.shutdown().unwrap();
    });
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    let conn = blocking::handshake_tcp(tcp, &Identity::generate(), &Config::default()).unwrap();
    let (r, _w) = conn.split().unwrap();
    let got: Vec<String> = r.lines().map(|l| l.unwrap()).collect();
    assert_eq!(got.join("\n") + "\n", text);
    t.join().unwrap();
}
