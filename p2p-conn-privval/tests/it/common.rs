//! What the privval tests share: votes and block IDs, scratch folders,
//! and the suites' common helpers (the property-test configuration, the
//! secret-connection pair).

#[cfg(feature = "tokio")]
pub use p2p_conn::testkit::tokio_secret_pair;
#[cfg(feature = "tokio")]
pub use p2p_conn_interop::proptest_config;

use std::path::PathBuf;

use p2p_conn_privval::{BlockId, PartSetHeader, Timestamp, Vote};

/// Block ID number `n`: 0 is the nil block ID, any other a 32-byte hash of
/// `n` with a one-part header.
pub fn block(n: u8) -> BlockId {
    let mut id = BlockId::default();
    if n == 0 {
        return id;
    }
    id.hash = vec![n; 32];
    let mut psh = PartSetHeader::default();
    psh.total = 1;
    psh.hash = vec![n ^ 0xff; 32];
    id.part_set_header = psh;
    id
}

/// A vote of `msg_type` at `height`/`round` for [`block`] `block_n`, at
/// `secs` seconds past the epoch.
pub fn vote(msg_type: i32, height: i64, round: i32, block_n: u8, secs: i64) -> Vote {
    let mut v = Vote::default();
    v.msg_type = msg_type;
    v.height = height;
    v.round = round;
    v.block_id = block(block_n);
    v.timestamp = Timestamp::new(secs, 0);
    v
}

/// A new empty folder for one test's key and state files:
/// `p2p-conn-privval-<tag>-<pid>-<nanos>` in the temporary directory.
pub fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "p2p-conn-privval-{tag}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
