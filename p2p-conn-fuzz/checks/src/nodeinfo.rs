//! `nodeinfo`: the NodeInfo reader, whole and chunked.

use crate::Seeds;
use p2p_conn::delimited::Feed;
use p2p_conn::nodeinfo::{Decoder, NodeInfo, MAX_NODE_INFO_SIZE};
use p2p_conn::PublicKey;

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
            let _ = info.check_id(PublicKey::from_bytes([0; 32]).node_id());
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

/// The seeds this check owns, written to `seeds/nodeinfo/` by `gen_seeds`:
/// the NodeInfo `p2p-conn probe` sends, one as a CometBFT v1.0.1 node sends
/// it (its fields as a local node sent them) followed by the MConnection
/// bytes that come after it, the first one cut short, and a length over the
/// limit. The first byte of each is the chunk size.
pub fn seeds() -> Seeds {
    use crate::cat;
    use p2p_conn::nodeinfo::ProtocolVersion;

    let probe = NodeInfo {
        protocol_version: ProtocolVersion {
            p2p: 9,
            block: 11,
            app: 0,
        },
        id: "c9abff1169ef3ee1a7a5ad39ed4f55d36255d785".into(),
        listen_addr: "0.0.0.0:0".into(),
        network: "netA".into(),
        version: "0.1.0".into(),
        channels: Vec::new(),
        moniker: "p2p-conn".into(),
        tx_index: "off".into(),
        rpc_address: String::new(),
    };
    let v1_node = NodeInfo {
        protocol_version: ProtocolVersion {
            p2p: 9,
            block: 11,
            app: 1,
        },
        id: "f981ab195d664a8e2c6f7d6358628e05a8b5be8d".into(),
        listen_addr: "tcp://127.0.0.1:36656".into(),
        network: "test-chain-kIcdG4".into(),
        version: "1.0.1".into(),
        channels: vec![0x40, 0x20, 0x21, 0x22, 0x23, 0x30, 0x38, 0x60, 0x61, 0x00],
        moniker: "vm".into(),
        tx_index: "on".into(),
        rpc_address: "tcp://127.0.0.1:36657".into(),
    };
    let probe = probe.encode_delimited().expect("a small NodeInfo");
    let v1_node = v1_node.encode_delimited().expect("a small NodeInfo");

    let mut s = Seeds::default();
    s.add("p2p-conn-probe", &cat(&[&[0xff], &probe]));
    s.add(
        "cometbft-v1-node",
        &cat(&[&[7], &v1_node, b"trailing MConnection bytes"]),
    );
    s.add("truncated", &cat(&[&[3], &probe[..40]]));
    // A length of 10,241 bytes, over MAX_NODE_INFO_SIZE.
    s.add("oversized-prefix", &[1, 0x81, 0x50]);
    s
}
