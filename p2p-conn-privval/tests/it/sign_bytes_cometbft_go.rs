//! `p2p_conn_privval`'s sign bytes against CometBFT's own
//! `VoteSignBytes`, `ProposalSignBytes` and `VoteExtensionSignBytes`, run in
//! the Go peer (`cometbft-peer signbytes`, `interop/cometbft-go`) at every
//! release line the suite proves. One test per line
//! (`p2p_conn_interop::per_release!`); each sends the same cases: hand-picked
//! edges (zero and nil fields, negative and extreme heights and rounds, the
//! timestamp range CometBFT accepts, empty, long and non-ASCII chain IDs,
//! every block-ID shape) and [`GENERATED`] pseudo-random ones per kind from a
//! fixed seed. Every case must match byte for byte; extensions are checked
//! from v0.38.26 (v0.34.35 and v0.37.18 have no `VoteExtensionSignBytes`:
//! the Go peer must answer `unsupported` there).
//!
//! Without the Go toolchain each test prints a notice and passes, unless
//! `CI=true`, where it fails.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use p2p_conn_interop::cometbft_go::GoVersion;
use p2p_conn_interop::go_peer::go_peer;
use p2p_conn_interop::process::{Feed, Proc};
use p2p_conn_privval::{
    proposal_sign_bytes, signed_msg_type, vote_extension_sign_bytes, vote_sign_bytes, BlockId,
    Proposal, Timestamp, Vote,
};

/// Pseudo-random cases per kind (vote, proposal, extension), on top of the
/// hand-picked ones.
const GENERATED: usize = 400;

/// The timestamps CometBFT can encode (`gogoproto` refuses years outside
/// 0001 to 9999): 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z.
const MIN_SECONDS: i64 = -62_135_596_800;
const MAX_SECONDS: i64 = 253_402_300_799;

/// splitmix64: a fixed, dependency-free stream of cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }
    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Vote,
    Proposal,
    Extension,
}

struct Case {
    kind: Kind,
    chain_id: String,
    height: i64,
    round: i32,
    msg_type: i32,
    pol_round: i32,
    block_id: BlockId,
    timestamp: Timestamp,
    extension: Vec<u8>,
}

impl Case {
    fn vote(&self) -> Vote {
        let mut v = Vote::default();
        v.msg_type = self.msg_type;
        v.height = self.height;
        v.round = self.round;
        v.block_id = self.block_id.clone();
        v.timestamp = self.timestamp;
        v.extension = self.extension.clone();
        // Not signed: they must not change the bytes.
        v.validator_address = vec![0xaa; 20];
        v.validator_index = 7;
        v.signature = vec![0xbb; 64];
        v.extension_signature = vec![0xcc; 64];
        v
    }

    fn proposal(&self) -> Proposal {
        let mut p = Proposal::default();
        p.msg_type = self.msg_type;
        p.height = self.height;
        p.round = self.round;
        p.pol_round = self.pol_round;
        p.block_id = self.block_id.clone();
        p.timestamp = self.timestamp;
        p.signature = vec![0xdd; 64];
        p
    }

    fn ours(&self) -> Vec<u8> {
        match self.kind {
            Kind::Vote => vote_sign_bytes(&self.chain_id, &self.vote()),
            Kind::Proposal => proposal_sign_bytes(&self.chain_id, &self.proposal()),
            Kind::Extension => vote_extension_sign_bytes(&self.chain_id, &self.vote()),
        }
    }

    /// One JSON line for `cometbft-peer signbytes`: the message as
    /// encoding/json reads the line's protobuf struct.
    fn json(&self) -> String {
        let kind = match self.kind {
            Kind::Vote => "vote",
            Kind::Proposal => "proposal",
            Kind::Extension => "extension",
        };
        let b = &self.block_id;
        let block_id = format!(
            r#"{{"hash":{},"part_set_header":{{"total":{},"hash":{}}}}}"#,
            bytes_json(&b.hash),
            b.part_set_header.total,
            bytes_json(&b.part_set_header.hash)
        );
        let mut msg = format!(
            r#"{{"type":{},"height":{},"round":{},"block_id":{block_id}"#,
            self.msg_type, self.height, self.round
        );
        match self.kind {
            Kind::Proposal => write!(msg, r#","pol_round":{},"signature":{}"#, self.pol_round, bytes_json(&[0xdd; 64])).unwrap(),
            _ => write!(
                msg,
                r#","validator_address":{},"validator_index":7,"signature":{},"extension":{},"extension_signature":{}"#,
                bytes_json(&[0xaa; 20]),
                bytes_json(&[0xbb; 64]),
                bytes_json(&self.extension),
                bytes_json(&[0xcc; 64])
            )
            .unwrap(),
        }
        msg.push('}');
        format!(
            r#"{{"kind":"{kind}","chain_id":{},"msg":{msg},"seconds":{},"nanos":{}}}"#,
            string_json(&self.chain_id),
            self.timestamp.seconds,
            self.timestamp.nanos
        )
    }

    fn describe(&self) -> String {
        self.json()
    }
}

fn bytes_json(b: &[u8]) -> String {
    let items: Vec<String> = b.iter().map(u8::to_string).collect();
    format!("[{}]", items.join(","))
}

fn string_json(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => write!(out, "\\u{:04x}", c as u32).unwrap(),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn block_id(hash: Vec<u8>, total: u32, psh_hash: Vec<u8>) -> BlockId {
    let mut b = BlockId::default();
    b.hash = hash;
    b.part_set_header.total = total;
    b.part_set_header.hash = psh_hash;
    b
}

/// Every block-ID shape CometBFT accepts: nil, full, a hash with an empty
/// part-set header, parts without a block hash, only a part-set hash.
fn block_ids(rng: &mut Rng) -> Vec<BlockId> {
    vec![
        BlockId::default(),
        block_id(rng.bytes(32), rng.next() as u32, rng.bytes(32)),
        block_id(rng.bytes(32), 0, vec![]),
        block_id(vec![], 1, vec![]),
        block_id(vec![], 0, rng.bytes(32)),
        block_id(rng.bytes(32), u32::MAX, rng.bytes(32)),
    ]
}

fn chain_ids(rng: &mut Rng) -> Vec<String> {
    let long: String = (0..200).map(|i| (b'a' + (i % 26) as u8) as char).collect();
    vec![
        String::new(),
        "c".into(),
        "cosmoshub-4".into(),
        format!("test-chain-{:x}", rng.next()),
        long,
        "链-ü-\"quoted\"\\".into(),
    ]
}

fn cases() -> Vec<Case> {
    let mut rng = Rng(0x1919_1919);
    let heights = [0, 1, -1, 2, 127, 128, i64::MAX, i64::MIN, 1 << 40];
    let rounds = [0, 1, -1, 2, i32::MAX, i32::MIN, 1000];
    let types = [
        signed_msg_type::UNKNOWN,
        signed_msg_type::PREVOTE,
        signed_msg_type::PRECOMMIT,
        signed_msg_type::PROPOSAL,
        3,
        -5,
    ];
    let times = [
        Timestamp::new(0, 0),
        Timestamp::new(0, 1),
        Timestamp::new(1, 0),
        Timestamp::new(-1, 999_999_999),
        Timestamp::new(1_700_000_000, 123_456_789),
        Timestamp::new(MIN_SECONDS, 0),
        Timestamp::new(MAX_SECONDS, 999_999_999),
    ];
    let ids = block_ids(&mut rng);
    let chains = chain_ids(&mut rng);
    let mut out = Vec::new();
    for kind in [Kind::Vote, Kind::Proposal, Kind::Extension] {
        // Each edge value once, the other fields at a typical value.
        let base = |rng: &mut Rng| Case {
            kind,
            chain_id: "test-chain".into(),
            height: 100,
            round: 0,
            msg_type: signed_msg_type::PRECOMMIT,
            pol_round: -1,
            block_id: block_id(rng.bytes(32), 1, rng.bytes(32)),
            timestamp: Timestamp::new(1_700_000_000, 1),
            extension: b"extension".to_vec(),
        };
        for &h in &heights {
            out.push(Case {
                height: h,
                ..base(&mut rng)
            });
        }
        for &r in &rounds {
            out.push(Case {
                round: r,
                ..base(&mut rng)
            });
            out.push(Case {
                pol_round: r,
                ..base(&mut rng)
            });
        }
        for &t in &types {
            out.push(Case {
                msg_type: t,
                ..base(&mut rng)
            });
        }
        for &t in &times {
            out.push(Case {
                timestamp: t,
                ..base(&mut rng)
            });
        }
        for id in &ids {
            out.push(Case {
                block_id: id.clone(),
                ..base(&mut rng)
            });
        }
        for c in &chains {
            out.push(Case {
                chain_id: c.clone(),
                ..base(&mut rng)
            });
        }
        for len in [0, 1, 1000] {
            let ext = rng.bytes(len);
            out.push(Case {
                extension: ext,
                ..base(&mut rng)
            });
        }
        // All zero: the empty canonical message but for the timestamp.
        out.push(Case {
            kind,
            chain_id: String::new(),
            height: 0,
            round: 0,
            msg_type: 0,
            pol_round: 0,
            block_id: BlockId::default(),
            timestamp: Timestamp::new(0, 0),
            extension: vec![],
        });
        for _ in 0..GENERATED {
            let timestamp = if rng.below(4) == 0 {
                rng.pick(&times)
            } else {
                let span = (MAX_SECONDS - MIN_SECONDS) as u64;
                Timestamp::new(
                    MIN_SECONDS + rng.below(span) as i64,
                    rng.below(1_000_000_000) as i32,
                )
            };
            let extension = match rng.below(3) {
                0 => vec![],
                1 => {
                    let n = rng.below(40) as usize;
                    rng.bytes(n)
                }
                _ => {
                    let n = rng.below(3000) as usize;
                    rng.bytes(n)
                }
            };
            out.push(Case {
                kind,
                chain_id: rng
                    .pick(&[0usize, 1, 2, 3, 4, 5])
                    .to_string()
                    .repeat(rng.below(3) as usize)
                    + &chains[rng.below(chains.len() as u64) as usize],
                height: if rng.below(3) == 0 {
                    rng.pick(&heights)
                } else {
                    rng.next() as i64
                },
                round: if rng.below(3) == 0 {
                    rng.pick(&rounds)
                } else {
                    rng.next() as i32
                },
                msg_type: rng.pick(&types),
                pol_round: if rng.below(2) == 0 {
                    -1
                } else {
                    rng.next() as i32
                },
                block_id: ids[rng.below(ids.len() as u64) as usize].clone(),
                timestamp,
                extension,
            });
        }
    }
    out
}

fn sign_bytes_match_cometbft(version: GoVersion, test: &str) {
    let Some(bin) = go_peer(version, test) else {
        return;
    };
    let cases = cases();
    let input: String = cases.iter().map(|c| c.json() + "\n").collect();
    let out = Proc::spawn(&bin, &["signbytes"], Feed::Now(input.into_bytes()))
        .finish_ok(Instant::now() + Duration::from_secs(60));
    let lines: Vec<String> = out.stdout_text().lines().map(String::from).collect();
    assert_eq!(lines.len(), cases.len(), "{test}: one answer per case");
    let extensions = !matches!(version, GoVersion::V034 | GoVersion::V037);
    let mut compared = 0;
    for (case, line) in cases.iter().zip(&lines) {
        if case.kind == Kind::Extension && !extensions {
            assert_eq!(line, "unsupported", "{test}: {}", case.describe());
            continue;
        }
        assert_eq!(
            *line,
            hex::encode(case.ours()),
            "{test}: sign bytes differ (left: CometBFT, right: ours) for {}",
            case.describe()
        );
        compared += 1;
    }
    eprintln!(
        "{test}: {compared} of {} cases compared byte for byte",
        cases.len()
    );
}

p2p_conn_interop::per_release! {
    v0_34: V034, v0_37: V037, v0_38: V038, v0_39: V039, v0_40: V040, v1: V1;
    [sign_bytes_match_cometbft]
}
