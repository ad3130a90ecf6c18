//! Memory the NodeInfo reader allocates for what a peer announces, counted
//! on this thread by the counting allocator (the decoder runs here; a
//! count of the whole process would also see other tests' threads end):
//! never more than the limit, and nothing for a length above it.

use crate::common::alloc::live_here as live;
use p2p_conn::delimited::Feed;
use p2p_conn::nodeinfo::{Decoder, NodeInfoError, MAX_NODE_INFO_SIZE};

#[test]
fn the_reader_allocates_at_most_the_limit() {
    let _serial = crate::common::serial();
    // Announced lengths: the limit (allowed), one above it, and the largest
    // u64 (both refused at the prefix).
    let at_limit = [0x80, 0x50]; // 10240
    let above = [0x81, 0x50]; // 10241
    let huge = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];

    let before = live();
    let mut waiting = Decoder::new();
    assert_eq!(waiting.feed(&at_limit).unwrap(), (2, None));
    let held = live() - before;
    assert!(
        (MAX_NODE_INFO_SIZE as isize..=MAX_NODE_INFO_SIZE as isize + 64).contains(&held),
        "a decoder waiting for a {MAX_NODE_INFO_SIZE}-byte message holds {held} bytes"
    );
    drop(waiting);

    for prefix in [&above[..], &huge[..]] {
        let before = live();
        let mut dec = Decoder::new();
        assert!(matches!(
            dec.feed(prefix),
            Err(NodeInfoError::TooLarge { .. })
        ));
        let held = live() - before;
        assert!(held <= 0, "refusing {prefix:02x?} allocated {held} bytes");
    }

    // A smaller limit caps the buffer too.
    let before = live();
    let mut dec = Decoder::with_limit(1024);
    assert!(dec.feed(&at_limit).is_err());
    assert!(dec.feed(&[]).is_err(), "a spent decoder refuses more input");
    assert!(live() - before <= 0);
}
