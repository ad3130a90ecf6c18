//! `nodeinfo`: the NodeInfo reader, whole and chunked.

use p2p_conn::nodeinfo::{Decoder, NodeInfo, MAX_NODE_INFO_SIZE};
use p2p_conn::NodeId;

/// `nodeinfo`: the NodeInfo reader on any bytes. The first byte sets the
/// chunk size the rest is fed in; fed whole or in chunks, the decoder must
/// reach the same result after taking the same bytes, never more than the
/// message. A decoded NodeInfo must survive the checks and re-encode to
/// one that decodes equal.
pub fn check(data: &[u8]) {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(split).max(1);
    let whole = Decoder::new().feed(rest);
    let mut dec = Decoder::new();
    let mut used = 0;
    let mut chunked = None;
    for piece in rest.chunks(chunk) {
        match dec.feed(piece) {
            Ok((n, None)) => {
                assert_eq!(n, piece.len(), "an unfinished decoder left input");
                used += n;
            }
            Ok((n, Some(info))) => {
                used += n;
                chunked = Some(Ok(info));
                break;
            }
            Err(e) => {
                chunked = Some(Err(e.to_string()));
                break;
            }
        }
    }
    match (whole, chunked) {
        (Ok((n, Some(info))), Some(Ok(again))) => {
            assert_eq!(n, used, "whole and chunked took different lengths");
            assert_eq!(info, again);
            assert!(n <= rest.len());
            let _ = info.validate();
            let _ = info.compatible_with(&info);
            let _ = info.check_id(NodeId::from_public_key(&[0; 32]));
            if let Ok(wire) = info.encode_delimited() {
                assert!(wire.len() <= MAX_NODE_INFO_SIZE + 2);
                let (m, back) = Decoder::new().feed(&wire).expect("our own encoding");
                assert_eq!(m, wire.len());
                assert_eq!(
                    back.as_ref(),
                    Some(&info),
                    "re-encoded NodeInfo decodes differently"
                );
            }
        }
        (Ok((n, None)), None) => assert_eq!(n, rest.len()),
        (Err(e), Some(Err(again))) => assert_eq!(e.to_string(), again),
        (whole, chunked) => panic!("whole {whole:?} and chunked {chunked:?} disagree"),
    }
    // The body decoder alone, on the raw bytes.
    if let Ok(info) = NodeInfo::decode(rest) {
        let _ = info.validate();
    }
}
