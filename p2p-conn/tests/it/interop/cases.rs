//! The scenarios: full duplex at every size in both TCP roles and every
//! adapter, small read buffers, the other write paths and the codec, the
//! framing tendermint-p2p sees, and expected peer IDs.

use super::*;

// ---------------------------------------------------------------------------
// Full duplex, all sizes, both roles, both adapters.

#[test]
fn tokio_dialer_large_reads() {
    run(Scenario::new(
        Role::Dialer,
        Adapter::Tokio,
        LARGE_READ_BUF,
        ALL_SIZES,
    ));
}

#[test]
fn tokio_acceptor_large_reads() {
    run(Scenario::new(
        Role::Acceptor,
        Adapter::Tokio,
        LARGE_READ_BUF,
        ALL_SIZES,
    ));
}

#[test]
fn blocking_dialer_large_reads() {
    run(Scenario::new(
        Role::Dialer,
        Adapter::Blocking,
        LARGE_READ_BUF,
        ALL_SIZES,
    ));
}

#[test]
fn blocking_acceptor_large_reads() {
    run(Scenario::new(
        Role::Acceptor,
        Adapter::Blocking,
        LARGE_READ_BUF,
        ALL_SIZES,
    ));
}

// Small read buffers on our side (tendermint-p2p's frames are cut into
// 1-byte / 7-byte pieces; with 7, frame boundaries fall inside a read). Even
// 4 MiB at 1 byte per read takes only ~1.3 s in a debug build, so these run
// the full schedule.

#[test]
fn tokio_dialer_1_byte_reads() {
    run(Scenario::new(Role::Dialer, Adapter::Tokio, 1, ALL_SIZES));
}

#[test]
fn blocking_acceptor_1_byte_reads() {
    run(Scenario::new(
        Role::Acceptor,
        Adapter::Blocking,
        1,
        ALL_SIZES,
    ));
}

#[test]
fn tokio_acceptor_7_byte_reads() {
    run(Scenario::new(Role::Acceptor, Adapter::Tokio, 7, ALL_SIZES));
}

#[test]
fn blocking_dialer_7_byte_reads() {
    run(Scenario::new(Role::Dialer, Adapter::Blocking, 7, ALL_SIZES));
}

// ---------------------------------------------------------------------------
// Our other write paths and the codec adapter, full duplex, all sizes, both
// TCP roles each.

/// `send()` instead of `write` + `write_all` + `flush`.
#[test]
fn tokio_send_acceptor() {
    run(Scenario {
        api: WriteApi::Send,
        ..Scenario::new(Role::Acceptor, Adapter::Tokio, LARGE_READ_BUF, ALL_SIZES)
    });
}

#[test]
fn blocking_send_dialer_7_byte_reads() {
    run(Scenario {
        api: WriteApi::Send,
        ..Scenario::new(Role::Dialer, Adapter::Blocking, 7, ALL_SIZES)
    });
}

/// `codec::handshake_split`; our read capacity 64 KiB.
#[test]
fn codec_split_dialer() {
    run(Scenario::new(
        Role::Dialer,
        Adapter::CodecSplit,
        LARGE_READ_BUF,
        ALL_SIZES,
    ));
}

/// `codec::handshake_split`; a 3000-byte read capacity, so frames straddle
/// reads.
#[test]
fn codec_split_acceptor_3000_byte_capacity() {
    run(Scenario::new(
        Role::Acceptor,
        Adapter::CodecSplit,
        3000,
        ALL_SIZES,
    ));
}

/// `codec::handshake` (one `Framed`, split with `StreamExt::split`).
#[test]
fn codec_framed_both_roles() {
    run(Scenario::new(
        Role::Acceptor,
        Adapter::CodecFramed,
        LARGE_READ_BUF,
        ALL_SIZES,
    ));
    run(Scenario::new(
        Role::Dialer,
        Adapter::CodecFramed,
        1044,
        SIZES_TO_64K,
    ));
}

// ---------------------------------------------------------------------------
// Framing as tendermint-p2p sees it.

/// A 1000-byte write is one frame: tendermint-p2p's single read with a
/// 4096-byte buffer returns all 1000 bytes (it returns at most one frame per
/// read, so a split would show as a shorter read).
#[test]
fn write_of_1000_bytes_is_one_tendermint_read() {
    for adapter in [Adapter::Tokio, Adapter::Blocking] {
        run(Scenario {
            theirs: &[],
            ..Scenario::new(Role::Dialer, adapter, LARGE_READ_BUF, &[1000])
        });
    }
}

// ---------------------------------------------------------------------------
// expected_peer_id

#[test]
fn expected_peer_id_matches_tendermint_node_id() {
    for (role, adapter) in [
        (Role::Dialer, Adapter::Tokio),
        (Role::Acceptor, Adapter::Blocking),
    ] {
        run(Scenario {
            expect_peer: true,
            ..Scenario::new(role, adapter, LARGE_READ_BUF, SIZES_TO_64K)
        });
    }
}

/// Our handshake against tendermint-p2p with `expected_peer_id` set to an ID
/// one hex digit away from the peer's: fails with `PeerIdMismatch` naming both
/// IDs, and tendermint-p2p never gets a byte of application data.
fn peer_id_mismatch(role: Role, adapter: Adapter) {
    let (ours, theirs) = tcp_pair(role);
    let identity = Identity::generate();
    let tm_key = SigningKey::new(OsRng);
    let tm_id = tm_node_id(&tm_key);
    let hex = tm_id.to_string();
    let last = if hex.ends_with('0') { '1' } else { '0' };
    let wrong: NodeId = format!("{}{last}", &hex[..39]).parse().unwrap();
    assert_ne!(wrong, tm_id);
    let config = Config::default().expect_peer(wrong);

    supervise(|crew| {
        crew.spawn("tm", move || {
            // p2p-conn sends its AuthSigMessage before it checks the peer ID,
            // so tendermint-p2p may well complete its handshake; then the
            // connection must close without any data.
            if let Ok(conn) = TmConnection::new(theirs, tm_key, Version::V0_34) {
                let (_tx, mut rx) = conn.split().expect("tendermint-p2p split");
                let r = rx.read(&mut [0u8; TM_READ_BUF]);
                assert!(
                    !matches!(r, Ok(n) if n > 0),
                    "tendermint-p2p got data from a peer that rejected it: {r:?}"
                );
            }
        });
        crew.spawn("us", move || {
            let result = match adapter {
                Adapter::Blocking => blocking::handshake_tcp(ours, &identity, &config).map(drop),
                Adapter::Tokio => tokio_runtime().block_on(async {
                    ptokio::handshake(tokio_stream(ours), &identity, &config)
                        .await
                        .map(drop)
                }),
                Adapter::CodecSplit => tokio_runtime().block_on(async {
                    codec::handshake_split(tokio_stream(ours), &identity, &config)
                        .await
                        .map(drop)
                }),
                Adapter::CodecFramed => tokio_runtime().block_on(async {
                    codec::handshake(tokio_stream(ours), &identity, &config)
                        .await
                        .map(drop)
                }),
            };
            match result {
                Err(Error::PeerIdMismatch { expected, actual }) => {
                    assert_eq!(expected, wrong);
                    assert_eq!(actual, tm_id);
                }
                other => panic!("expected PeerIdMismatch, got {other:?}"),
            }
        });
    });
}

#[test]
fn expected_peer_id_mismatch_tokio_dialer() {
    peer_id_mismatch(Role::Dialer, Adapter::Tokio);
}

#[test]
fn expected_peer_id_mismatch_blocking_acceptor() {
    peer_id_mismatch(Role::Acceptor, Adapter::Blocking);
}

#[test]
fn expected_peer_id_mismatch_codec() {
    peer_id_mismatch(Role::Acceptor, Adapter::CodecSplit);
    peer_id_mismatch(Role::Dialer, Adapter::CodecFramed);
}

/// The test's own premise: contents differ per direction and per message from
/// the first byte on, so a swapped or misrouted message cannot pass.
#[test]
fn message_contents_differ_per_direction_and_index() {
    for (i, &len) in ALL_SIZES.iter().enumerate().skip(1) {
        let ours = message(US_TO_TM, i, len);
        let theirs = message(TM_TO_US, i, len);
        let next = message(US_TO_TM, i + 1, len);
        assert_eq!(ours.len(), len);
        assert_ne!(ours[0], theirs[0], "message {i}");
        assert_ne!(ours[0], next[0], "message {i}");
        assert_ne!(ours, theirs);
        assert_ne!(ours, next);
    }
    assert_eq!(
        frame_sizes(&[0, 1, 1024, 1025, 3000]),
        [1, 1024, 1024, 1, 1024, 1024, 952]
    );
}
