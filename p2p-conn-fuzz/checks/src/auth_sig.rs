//! `auth_sig`: the AuthSigMessage decoder, the varint reader and the
//! ephemeral-key message parser.

use crate::internals::{read_uvarint, Varint};
use crate::Seeds;
use p2p_conn::proto::{HandshakeParams, Stage};
use p2p_conn::testkit;
use p2p_conn::testkit::internals::auth_sig;
use p2p_conn::testkit::internals::wire::EPH_MSG_LEN;
use p2p_conn::testkit::internals::HandshakeHooks;
use p2p_conn::ProtocolError;

/// `auth_sig::decode` and `read_uvarint` on arbitrary bytes, and the
/// handshake's ephemeral-key message parser (not public on its own: driven
/// through a [`Handshake`]).
///
/// Checks: no panic; a decoded (key, signature) re-encodes with
/// `auth_sig::encode` into the canonical 103-byte message, which decodes to
/// the same pair; a decoded varint used at most 10 bytes of the input and
/// its canonical encoding is no longer and decodes to the same value; the
/// ephemeral message is accepted only with the `22 0a 20` prefix.
pub fn check(data: &[u8]) {
    if let Ok((key, sig)) = auth_sig::decode(data) {
        let enc = auth_sig::encode(&key, &sig);
        assert_eq!(
            enc.len(),
            p2p_conn::testkit::internals::wire::AUTH_SIG_MSG_LEN
        );
        assert_eq!(usize::from(enc[0]), enc.len() - 1, "delimiting prefix");
        assert_eq!(
            auth_sig::decode(&enc[1..]),
            Ok((key, sig)),
            "re-encoded message decodes differently"
        );
    }
    match read_uvarint(data) {
        Varint::Value(v, n) => {
            assert!(
                (1..=10).contains(&n) && n <= data.len(),
                "varint used {n} bytes"
            );
            let canon = uvarint(v);
            assert!(canon.len() <= n);
            assert_eq!(read_uvarint(&canon), Varint::Value(v, canon.len()));
        }
        Varint::Incomplete => assert!(data.len() < 10 && data.iter().all(|b| b & 0x80 != 0)),
        Varint::Overflow => assert!(data.len() >= 10),
    }

    // The ephemeral-key message: the first 35 bytes into a fresh handshake.
    let msg = &data[..data.len().min(EPH_MSG_LEN)];
    let (_, mut hs) = testkit::deterministic_handshake(3, HandshakeParams::default());
    let local = hs.local_ephemeral_key();
    let r = testkit::feed(&mut hs, msg);
    let well_formed = msg.len() >= 3 && msg[..3] == [0x22, 0x0a, 0x20];
    // Our own key comes back (bit 255 is ignored, as X25519 ignores it).
    let reflected = msg.len() == 35 && {
        let (mut r, mut l) = ([0u8; 32], local);
        r.copy_from_slice(&msg[3..]);
        r[31] &= 0x7f;
        l[31] &= 0x7f;
        r == l
    };
    if msg.len() == EPH_MSG_LEN {
        match &r {
            Ok(()) => {
                assert!(well_formed, "accepted a malformed ephemeral message");
                assert!(!reflected, "accepted our own ephemeral key");
                assert_eq!(hs.stage(), Stage::AuthSignature);
            }
            Err(ProtocolError::MalformedEphemeralMessage(_)) => assert!(!well_formed),
            Err(ProtocolError::LowOrderEphemeralKey) => assert!(well_formed),
            Err(ProtocolError::ReflectedEphemeralKey) => {
                assert!(well_formed && reflected)
            }
            Err(e) => panic!("unexpected error for an ephemeral message: {e}"),
        }
    } else if r.is_ok() {
        assert_eq!(hs.stage(), Stage::EphemeralKey);
    }
}

/// The canonical unsigned LEB128 encoding of `v`.
fn uvarint(mut v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out
}

/// The seeds this check owns, written to `seeds/auth_sig/` by `gen_seeds`: a
/// real message body, one reordered with an unknown field, an ephemeral
/// message, a varint overflow, a secp256k1 key, and our own key reflected with
/// bit 255 set.
pub fn seeds() -> Seeds {
    use crate::cat;

    let mut s = Seeds::default();
    // A real message body, a reordered one, an ephemeral message.
    let id = testkit::deterministic_handshake(1, HandshakeParams::default()).0;
    let pk = *id.public_key().as_bytes();
    let sig = [0x5a; 64];
    let enc = auth_sig::encode(&pk, &sig);
    s.add("ed25519", &enc[1..]);
    let reordered = cat(&[
        &[0x12, 0x40],
        &sig,
        &[0x0a, 0x22, 0x0a, 0x20],
        &pk,
        &[0x18, 0x96, 0x01],
    ]);
    s.add("reordered-unknown-field", &reordered);
    let (_, hs) = testkit::deterministic_handshake(2, HandshakeParams::default());
    s.add("ephemeral-message", &hs.outgoing()[..35]);
    s.add("varint-overflow", &[0xff; 11]);
    // Found by this target in its first run, kept byte for byte: our own
    // ephemeral key (seed 3's) reflected back with bit 255 set, and one byte
    // more (see tests/seeds.rs).
    s.add(
        "reflected-key-bit255",
        &[
            0x22, 0x0a, 0x20, 0x32, 0xa9, 0xf0, 0xa0, 0x0c, 0x1f, 0xa1, 0x78, 0x8d, 0xfa, 0x28,
            0x51, 0xcb, 0x35, 0x27, 0x5f, 0x39, 0x4a, 0x0d, 0xf9, 0x51, 0x88, 0x30, 0xbf, 0x19,
            0x14, 0x72, 0x9c, 0xee, 0x91, 0x01, 0x94, 0x71,
        ],
    );
    s.add("secp256k1-key", &[0x0a, 0x23, 0x12, 0x21, 2, 1, 2, 3]);
    s
}
