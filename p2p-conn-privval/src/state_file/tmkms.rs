//! tmkms's consensus state file (its `[[chain]] state_file`), read only.
//!
//! # Format
//! As tmkms 0.15.0 writes it (`serde_json::to_string` of
//! `cometbft::consensus::State`, a new file renamed over the old one, with
//! no `fsync`): one line, no trailing newline; `height` and `round` are
//! decimal strings (tmkms reads no numbers there), `step` a number,
//! `block_id` always present: the block signed, or for nothing (the
//! initial state, a nil vote) empty hashes (`null` is read too).
//! ```text
//! {"height":"0","round":"0","step":0,"block_id":{"hash":"","parts":{"total":0,"hash":""}}}
//! {"height":"7","round":"0","step":2,"block_id":{"hash":"HEX","parts":{"total":1,"hash":"HEX"}}}
//! ```
//! tmkms's steps are proposal 0, prevote 1, precommit 2; FilePV's (and the
//! guard's) are 1, 2 and 3, with 0 for nothing signed. A file at height 0
//! is tmkms's initial state: nothing signed.
//!
//! # Telling it from FilePV's
//! A `block_id` field is tmkms's, `signature` and `signbytes` are
//! FilePV's, a string `round` is tmkms's and a number FilePV's. A file
//! with `block_id` must be tmkms's whole (string `round`, no FilePV
//! field); one without it must not have a string `round`. Anything else
//! is refused ([`StateFileProblem::Ambiguous`]): its step number would
//! mean another step in the other format.
//!
//! # The block ID
//! tmkms records the block ID it signed, not the sign bytes and the
//! signature: at the very height, round and step of its mark it signs the
//! same block ID again (any other timestamp included), where FilePV
//! returns its earlier signature. The mark read here keeps that block ID
//! ([`SignState::with_block_id`]: `hash`, `parts.total`, `parts.hash`;
//! `null` or an empty `hash` with no parts is nil), and the guard does as
//! tmkms there: it signs a request for that block ID and refuses any other
//! (`crate::guard`'s module docs say why that is never a double sign).
//! Everything else maps exactly.

use super::StateFileProblem;
use crate::guard::{Hrs, SignState, Step};
use crate::messages::{BlockId, PartSetHeader};

type Object = serde_json::Map<String, serde_json::Value>;

/// Whether `obj` is tmkms's state file (it has `block_id`); an error when
/// it mixes the formats (module docs).
pub(super) fn detect(obj: &Object) -> Result<bool, StateFileProblem> {
    let tmkms = obj.contains_key("block_id");
    let filepv_fields = obj.contains_key("signature") || obj.contains_key("signbytes");
    let string_round = matches!(obj.get("round"), Some(serde_json::Value::String(_)));
    let why = match (tmkms, filepv_fields, string_round) {
        (true, true, _) => "it has tmkms's block_id and FilePV's signature or signbytes",
        (true, false, false) => "it has tmkms's block_id but round is not a string as tmkms writes it",
        (false, _, true) => "round is a string as tmkms writes it, but it has no block_id (a tmkms file always has one)",
        _ => return Ok(tmkms),
    };
    Err(StateFileProblem::Ambiguous { why })
}

/// The mark of tmkms's state file `obj` (which [`detect`] found to be
/// one), as the guard's: each step one up, height 0 as nothing signed,
/// the block ID instead of sign bytes (module docs).
pub(super) fn mark(obj: &Object) -> Result<SignState, StateFileProblem> {
    let height = decimal(
        obj,
        "height",
        "an int64 as a decimal string (as tmkms writes it)",
    )?;
    let round = decimal(
        obj,
        "round",
        "an int32 as a decimal string (as tmkms writes it)",
    )?;
    let round = i32::try_from(round).map_err(|_| StateFileProblem::BadField {
        field: "round",
        expected: "an int32 as a decimal string (as tmkms writes it)",
    })?;
    let step_n =
        obj.get("step")
            .and_then(serde_json::Value::as_i64)
            .ok_or(StateFileProblem::BadField {
                field: "step",
                expected: "an integer",
            })?;
    let step = match step_n {
        0 => Step::Propose,
        1 => Step::Prevote,
        2 => Step::Precommit,
        step => return Err(StateFileProblem::BadTmkmsStep { step }),
    };
    let block_id = block_id(obj.get("block_id")).ok_or(StateFileProblem::BadField {
        field: "block_id",
        expected:
            "null or an object with a hash (hex, empty or 32 bytes) and parts (total and hash)",
    })?;
    if height == 0 && round == 0 && step == Step::Propose {
        return Ok(SignState::default());
    }
    Ok(SignState::with_block_id(
        Hrs::new(height, round, step),
        block_id,
    ))
}

/// A non-negative decimal string that fits an int64 (tmkms's `Height` and
/// `Round` read nothing else; an int64 bounds both).
fn decimal(
    obj: &Object,
    field: &'static str,
    expected: &'static str,
) -> Result<i64, StateFileProblem> {
    obj.get(field)
        .and_then(serde_json::Value::as_str)
        .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or(StateFileProblem::BadField { field, expected })
}

/// `block_id` as tmkms writes it: `null` (nil), or an object with `hash`
/// and `parts` (`total` a number or a decimal string, and `hash`), each
/// hash hex of 32 bytes or empty; `None` for anything else.
fn block_id(value: Option<&serde_json::Value>) -> Option<BlockId> {
    let hash = |v: Option<&serde_json::Value>| {
        v.and_then(serde_json::Value::as_str)
            .and_then(|h| hex::decode(h).ok())
            .filter(|h| h.is_empty() || h.len() == 32)
    };
    let id = match value? {
        serde_json::Value::Null => return Some(BlockId::default()),
        serde_json::Value::Object(id) => id,
        _ => return None,
    };
    let parts = id.get("parts")?.as_object()?;
    let total = match parts.get("total")? {
        serde_json::Value::Number(n) => n.as_u64(),
        serde_json::Value::String(s) if s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
        _ => None,
    }
    .and_then(|t| u32::try_from(t).ok())?;
    Some(BlockId {
        hash: hash(id.get("hash"))?,
        part_set_header: PartSetHeader {
            total,
            hash: hash(parts.get("hash"))?,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::super::{decode, Format};
    use super::*;

    /// Files tmkms 0.15.0 wrote (`cargo install tmkms --version =0.15.0
    /// --features softsign`), printed by the integration test
    /// `tmkms_state::tmkms_state_files_import_with_their_mark` run with
    /// `--nocapture`: at start, after a precommit for a block at 1/0, after
    /// a nil prevote at 2/0, after a proposal at 2/1.
    const AT_START: &str = r#"{"height":"0","round":"0","step":0,"block_id":{"hash":"","parts":{"total":0,"hash":""}}}"#;
    const PRECOMMIT_1_0: &str = r#"{"height":"1","round":"0","step":2,"block_id":{"hash":"0101010101010101010101010101010101010101010101010101010101010101","parts":{"total":1,"hash":"FEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFEFE"}}}"#;
    const NIL_PREVOTE_2_0: &str = r#"{"height":"2","round":"0","step":1,"block_id":{"hash":"","parts":{"total":0,"hash":""}}}"#;
    const PROPOSAL_2_1: &str = r#"{"height":"2","round":"1","step":0,"block_id":{"hash":"0202020202020202020202020202020202020202020202020202020202020202","parts":{"total":1,"hash":"FDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFDFD"}}}"#;

    fn read(text: &str) -> Result<SignState, StateFileProblem> {
        decode(text.as_bytes()).map(|d| {
            assert_eq!(d.format, Format::Tmkms, "{text}");
            d.state
        })
    }

    /// Block number `n` of the files above: a hash of `n`s, one part whose
    /// hash is `n ^ 0xff`s; 0 is nil.
    fn block(n: u8) -> BlockId {
        let mut id = BlockId::default();
        if n != 0 {
            id.hash = vec![n; 32];
            id.part_set_header.total = 1;
            id.part_set_header.hash = vec![n ^ 0xff; 32];
        }
        id
    }

    #[test]
    fn tmkms_files_map_each_step_one_up_with_the_block_id() {
        assert_eq!(read(AT_START), Ok(SignState::default()));
        for (text, hrs, n) in [
            (PRECOMMIT_1_0, Hrs::new(1, 0, Step::Precommit), 1),
            (NIL_PREVOTE_2_0, Hrs::new(2, 0, Step::Prevote), 0),
            (PROPOSAL_2_1, Hrs::new(2, 1, Step::Propose), 2),
        ] {
            assert_eq!(read(text), Ok(SignState::with_block_id(hrs, block(n))));
        }
        // A total as a string, lower-case hex: the same block ID.
        let text = PRECOMMIT_1_0
            .replace("\"total\":1", "\"total\":\"1\"")
            .replace("FE", "fe");
        assert_eq!(read(&text).unwrap().block_id(), Some(&block(1)));
    }

    /// Values tmkms never writes are refused, never clamped down.
    #[test]
    fn values_tmkms_never_writes_are_refused() {
        let with = |from: &str, to: &str| NIL_PREVOTE_2_0.replacen(from, to, 1);
        for (text, want) in [
            (
                with("\"step\":1", "\"step\":3"),
                StateFileProblem::BadTmkmsStep { step: 3 },
            ),
            (
                with("\"step\":1", "\"step\":-1"),
                StateFileProblem::BadTmkmsStep { step: -1 },
            ),
            (
                with("\"round\":\"0\"", "\"round\":\"2147483648\""),
                StateFileProblem::BadField {
                    field: "round",
                    expected: "an int32 as a decimal string (as tmkms writes it)",
                },
            ),
            (
                with("\"height\":\"2\"", "\"height\":\"-2\""),
                StateFileProblem::BadField {
                    field: "height",
                    expected: "an int64 as a decimal string (as tmkms writes it)",
                },
            ),
        ] {
            assert_eq!(read(&text), Err(want), "{text}");
        }
        let bad_block_id = StateFileProblem::BadField {
            field: "block_id",
            expected:
                "null or an object with a hash (hex, empty or 32 bytes) and parts (total and hash)",
        };
        for text in [
            with("\"hash\":\"\"", "\"hash\":\"zz\""),
            with("\"hash\":\"\"", "\"hash\":\"0A\""),
            with("\"hash\":\"\"", "\"hash\":7"),
            with(",\"parts\":{\"total\":0,\"hash\":\"\"}", ""),
            with("\"total\":0", "\"total\":-1"),
            with("\"total\":0", "\"total\":4294967296"),
            with("\"total\":0", "\"total\":\"x\""),
            with("\"total\":0,\"hash\":\"\"", "\"total\":0,\"hash\":\"AB\""),
            with(
                "\"block_id\":{\"hash\":\"\",\"parts\":{\"total\":0,\"hash\":\"\"}}",
                "\"block_id\":[]",
            ),
        ] {
            assert_eq!(read(&text), Err(bad_block_id), "{text}");
        }
        // tmkms reads a null block_id too: nil.
        let null = r#"{"height":"5","round":"1","step":2,"block_id":null}"#;
        assert_eq!(
            read(null),
            Ok(SignState::with_block_id(
                Hrs::new(5, 1, Step::Precommit),
                block(0)
            ))
        );
    }
}
