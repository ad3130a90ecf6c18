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
//! # Rounding up
//! tmkms records the block ID it signed, not the sign bytes and the
//! signature: at the very height, round and step of its mark it signs the
//! same block again, where FilePV returns its earlier signature. The mark
//! read here has neither, so the guard refuses anything at exactly that
//! height, round and step ([`crate::guard::GuardError::NoSignBytes`]) and
//! signs only above it: never below or beside what tmkms signed, at the
//! cost of at most one vote or proposal that tmkms would have signed
//! again. Everything else maps exactly.

use super::StateFileProblem;
use crate::guard::{Hrs, SignState, Step};

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
/// no sign bytes (module docs: rounding up).
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
    check_block_id(obj.get("block_id"))?;
    if height == 0 && round == 0 && step == Step::Propose {
        return Ok(SignState::default());
    }
    Ok(SignState::new(
        Hrs::new(height, round, step),
        Vec::new(),
        Vec::new(),
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

/// `block_id` is `null` or an object whose `hash` is empty or 32 bytes of
/// hex: the mark does not use it, but a file with another is not tmkms's.
fn check_block_id(value: Option<&serde_json::Value>) -> Result<(), StateFileProblem> {
    let ok = match value {
        Some(serde_json::Value::Null) => true,
        Some(serde_json::Value::Object(id)) => id
            .get("hash")
            .and_then(serde_json::Value::as_str)
            .is_some_and(|h| {
                h.is_empty() || (h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            }),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(StateFileProblem::BadField {
            field: "block_id",
            expected: "null or an object with a hex hash",
        })
    }
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

    #[test]
    fn tmkms_files_map_each_step_one_up() {
        assert_eq!(read(AT_START), Ok(SignState::default()));
        for (text, hrs) in [
            (PRECOMMIT_1_0, Hrs::new(1, 0, Step::Precommit)),
            (NIL_PREVOTE_2_0, Hrs::new(2, 0, Step::Prevote)),
            (PROPOSAL_2_1, Hrs::new(2, 1, Step::Propose)),
        ] {
            assert_eq!(read(text), Ok(SignState::new(hrs, Vec::new(), Vec::new())));
        }
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
            (
                with("\"hash\":\"\"", "\"hash\":\"zz\""),
                StateFileProblem::BadField {
                    field: "block_id",
                    expected: "null or an object with a hex hash",
                },
            ),
        ] {
            assert_eq!(read(&text), Err(want), "{text}");
        }
        // tmkms reads a null block_id too.
        let null = r#"{"height":"5","round":"1","step":2,"block_id":null}"#;
        assert_eq!(read(null).unwrap().hrs(), Hrs::new(5, 1, Step::Precommit));
    }
}
