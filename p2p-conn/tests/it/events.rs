//! The `tracing` events (`p2p_conn::events` in the source): a handshake's
//! outcome with its duration, and each side's close with its cause and
//! final counts, naming the peer's node ID and address. Captured with a
//! thread-local subscriber; the peer side runs on another thread, so only
//! the side under test is seen.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};

use crate::common::capture::capture;

use p2p_conn::io::blocking;
use p2p_conn::{Config, Error, Identity};

/// The lines of `text` that contain `what`.
fn lines<'a>(text: &'a str, what: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(what)).collect()
}

#[test]
fn handshake_and_close_events_name_the_peer_and_the_counts() {
    let (log, _guard) = capture();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer_identity = Identity::generate();
    let peer_id = peer_identity.node_id();
    let peer = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let mut conn = blocking::handshake_tcp(tcp, &peer_identity, &Config::default()).unwrap();
        conn.write_all(&[9u8; 3000]).unwrap();
        conn.shutdown().unwrap();
        let mut sink = Vec::new();
        conn.read_to_end(&mut sink).unwrap();
        sink.len()
    });
    let tcp = TcpStream::connect(addr).unwrap();
    let mut conn = blocking::handshake_tcp(tcp, &Identity::generate(), &Config::default()).unwrap();
    conn.write_all(&[1u8; 200]).unwrap();
    conn.write_all(&[2u8; 2000]).unwrap();
    conn.shutdown().unwrap();
    let mut got = Vec::new();
    conn.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), 3000);
    assert_eq!(peer.join().unwrap(), 2200);
    drop(conn);

    let text = log.text();
    let ok = lines(&text, "handshake succeeded");
    assert_eq!(ok.len(), 1, "{text}");
    let ok = ok[0];
    assert!(ok.contains("DEBUG"), "{ok}");
    assert!(ok.contains(&format!("peer={peer_id}")), "{ok}");
    assert!(ok.contains(&format!("addr={addr}")), "{ok}");
    assert!(ok.contains("duration_us="), "{ok}");

    let send = lines(&text, "send side closed");
    assert_eq!(send.len(), 1, "{text}");
    let send = send[0];
    assert!(send.contains(&format!("peer={peer_id}")), "{send}");
    // 200 + 2000 bytes: 1 + 2 frames.
    assert!(
        send.contains("frames=3 bytes=2200 wire_bytes=3132"),
        "{send}"
    );
    assert!(send.contains("dropped by the application"), "{send}");

    let recv = lines(&text, "receive side closed");
    assert_eq!(recv.len(), 1, "{text}");
    let recv = recv[0];
    assert!(recv.contains("frames=3 bytes=3000"), "{recv}");
    assert!(recv.contains("end of stream from the peer"), "{recv}");
}

#[test]
fn a_failed_handshake_says_why() {
    let (log, _guard) = capture();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer_identity = Identity::generate();
    let actual = peer_identity.node_id();
    let peer = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        // Fails on its side once we hang up; its events are not captured.
        let _ = blocking::handshake_tcp(tcp, &peer_identity, &Config::default());
    });
    let expected = Identity::generate().node_id();
    let tcp = TcpStream::connect(addr).unwrap();
    let r = blocking::handshake_tcp(
        tcp,
        &Identity::generate(),
        &Config::default().expect_peer(expected),
    );
    assert!(matches!(r, Err(Error::PeerIdMismatch { .. })));
    drop(r);
    peer.join().unwrap();
    let text = log.text();
    let failed = lines(&text, "handshake failed");
    assert_eq!(failed.len(), 1, "{text}");
    let failed = failed[0];
    assert!(failed.contains(&format!("peer={actual}")), "{failed}");
    assert!(failed.contains(&format!("expected={expected}")), "{failed}");
    assert!(failed.contains(&format!("addr={addr}")), "{failed}");
    assert!(
        lines(&text, "closed").is_empty(),
        "no connection, no close: {text}"
    );
}
