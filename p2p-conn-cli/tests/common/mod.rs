//! What the CLI's tests share with the library's: child processes
//! ([`process`]), CometBFT's Go peer ([`go_peer`]) and real nodes
//! ([`cometbft_node`]), scripted peers ([`scripted`]), fake PEX peers
//! ([`pex_peers`]) and byte-stream checks,
//! all from the `p2p-conn-interop` workspace crate, and the library's
//! deterministic payloads.
#![allow(dead_code, unused_imports)]

pub use p2p_conn::testkit::payload;
pub use p2p_conn_interop::compare::{check_bytes, check_bytes_at};
pub use p2p_conn_interop::{cometbft_node, go_peer, process, scripted};

pub mod pex_peers;

/// A peer of a new identity listening on 127.0.0.1, on a thread of its own
/// (a current-thread runtime) that lives as long as the test process: each
/// connection accepted is handed to `serve` with the identity and the
/// listening address. Returns that address and the identity's node ID.
pub fn serve_on_thread<F, Fut>(serve: F) -> (std::net::SocketAddr, String)
where
    F: Fn(tokio::net::TcpStream, std::sync::Arc<p2p_conn::Identity>, std::net::SocketAddr) -> Fut
        + Send
        + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let std_l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_l.set_nonblocking(true).unwrap();
    let addr = std_l.local_addr().unwrap();
    let identity = std::sync::Arc::new(p2p_conn::Identity::generate());
    let id = identity.node_id().to_string();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::from_std(std_l).unwrap();
            loop {
                let Ok((tcp, _)) = l.accept().await else {
                    continue;
                };
                tokio::spawn(serve(tcp, identity.clone(), addr));
            }
        });
    });
    (addr, id)
}

/// A node key of our own for a test, made by `p2p-conn keygen --out` in
/// the test's scratch folder.
pub struct OurKey {
    /// The scratch folder (the test removes it when it passes).
    pub dir: std::path::PathBuf,
    /// The key file's path.
    pub path: String,
    /// The node ID keygen printed.
    pub id: String,
}

/// Makes the key for `test` (see [`OurKey`]).
pub fn our_node_key(test: &str) -> OurKey {
    let dir = process::scratch(test.replace("::", "-").as_str());
    let path = dir.join("node_key.json").to_str().unwrap().to_string();
    let out = process::run_ok(
        std::path::Path::new(env!("CARGO_BIN_EXE_p2p-conn")),
        &["keygen", "--out", &path],
        std::time::Duration::from_secs(30),
    );
    OurKey {
        dir,
        path,
        id: out.stdout_text(),
    }
}

/// Waits (up to 30 s) for `node` to log, after `mark`, that it started its
/// MConnection with `our_id`; fails the test with the node's log if not.
pub fn wait_joined(node: &cometbft_node::Node, mark: usize, our_id: &str, test: &str) {
    let joined = node.wait_for_log_since(
        mark,
        &format!("peer={our_id}@"),
        std::time::Duration::from_secs(30),
    );
    assert!(
        joined,
        "{test}: the node never started our MConnection:\n{}",
        node.log_since(mark)
    );
}

/// Fails the test unless `dial` still runs and `node`'s RPC `net_info`
/// lists `our_id` among its peers.
pub fn check_still_peer(
    dial: &mut process::Proc,
    node: &cometbft_node::Node,
    our_id: &str,
    test: &str,
) {
    dial.check_running("it should still be the node's peer");
    let peers = node.peer_ids();
    assert!(
        peers.iter().any(|p| p == our_id),
        "{test}: net_info lists {peers:?}, not {our_id}"
    );
}

/// What a node's log must not say about the peer `id`: CometBFT's PEX
/// reactor (`p2p/pex/pex_reactor.go`, v0.38 to v1) stops a peer with
/// `StopPeerForError` ("Stopping peer for error", from `switch.go`) and
/// bans its address when it asks again within 10 s ("sent next PEX request
/// too soon") or sends addresses unasked ("unsolicited pexAddrsMessage");
/// `AddPeer` logs "Failed to get peer NetAddress" when an inbound peer's
/// listen address does not parse. A stop for `EOF` is us hanging up.
pub fn complaints(log: &str, id: &str) -> Vec<String> {
    log.lines()
        .filter(|l| l.contains(id))
        .filter(|l| {
            (l.contains("Stopping peer for error") && !l.contains("err=EOF"))
                || l.contains("too soon")
                || l.contains("unsolicited")
                || l.contains("Failed to get peer NetAddress")
                || l.to_lowercase().contains("ban")
        })
        .map(str::to_string)
        .collect()
}

/// One MConnection packet on the PEX channel, as a peer sends it over the
/// secret connection: a piece of a message, `eof` on its last piece (for
/// the hostile peers of the crawl and seed tests).
pub fn pex_piece(data: Vec<u8>, eof: bool) -> Vec<u8> {
    use p2p_conn_mconn::testkit::{encode_packet, Packet, PacketMsg};
    let mut out = Vec::new();
    encode_packet(
        &Packet::Msg(PacketMsg {
            channel_id: i32::from(p2p_conn_mconn::pex::PEX_CHANNEL),
            eof,
            data,
        }),
        &mut out,
    );
    out
}
