//! FilePV's `priv_validator_state.json`: its JSON, both ways.
//!
//! As FilePV writes it (`cmtjson.MarshalIndent(lss, "", "  ")`, v0.38.26
//! and v1.0.1): `height` is an int64, so a JSON string; `round` and `step`
//! are numbers; `signature` is standard base64 and `signbytes` upper-case
//! hex, both omitted when empty.
//! ```text
//! {
//!   "height": "5",
//!   "round": 0,
//!   "step": 3,
//!   "signature": "base64...",
//!   "signbytes": "HEX..."
//! }
//! ```
//! [`to_json`] writes exactly that (no trailing newline, as FilePV).
//! [`parse`] also accepts `height` as a number, lower-case hex, `null` or
//! empty `signature`/`signbytes`, and ignores other fields.

use base64::Engine;

use super::StateFileProblem;
use crate::guard::{Hrs, SignState, Step};

/// Parse the text of a `priv_validator_state.json`.
pub fn parse(json: &str) -> Result<SignState, StateFileProblem> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| StateFileProblem::NotJson {
            line: e.line(),
            column: e.column(),
        })?;
    mark(value.as_object().ok_or(StateFileProblem::NotObject)?)
}

/// The mark of a FilePV state file's JSON object (`parse`'s rules).
pub(super) fn mark(
    obj: &serde_json::Map<String, serde_json::Value>,
) -> Result<SignState, StateFileProblem> {
    let height = match obj.get("height") {
        Some(serde_json::Value::String(s)) => s.parse::<i64>().ok(),
        Some(serde_json::Value::Number(n)) => n.as_i64(),
        _ => None,
    }
    .ok_or(StateFileProblem::BadField {
        field: "height",
        expected: "an int64 (a decimal string)",
    })?;
    let round = obj
        .get("round")
        .and_then(serde_json::Value::as_i64)
        .and_then(|r| i32::try_from(r).ok())
        .ok_or(StateFileProblem::BadField {
            field: "round",
            expected: "an int32",
        })?;
    let step_n =
        obj.get("step")
            .and_then(serde_json::Value::as_i64)
            .ok_or(StateFileProblem::BadField {
                field: "step",
                expected: "an integer",
            })?;
    let step = i8::try_from(step_n)
        .ok()
        .and_then(Step::from_i8)
        .ok_or(StateFileProblem::BadStep { step: step_n })?;
    let signature = match obj.get("signature") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::String(s)) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|_| StateFileProblem::BadField {
            field: "signature",
            expected: "standard base64",
        })?,
        Some(_) => {
            return Err(StateFileProblem::BadField {
                field: "signature",
                expected: "a base64 string",
            })
        }
    };
    let sign_bytes = match obj.get("signbytes") {
        None | Some(serde_json::Value::Null) => Vec::new(),
        Some(serde_json::Value::String(s)) => {
            hex::decode(s).map_err(|_| StateFileProblem::BadField {
                field: "signbytes",
                expected: "hex",
            })?
        }
        Some(_) => {
            return Err(StateFileProblem::BadField {
                field: "signbytes",
                expected: "a hex string",
            })
        }
    };
    if !sign_bytes.is_empty() && signature.is_empty() {
        return Err(StateFileProblem::SignBytesWithoutSignature);
    }
    Ok(SignState::new(
        Hrs::new(height, round, step),
        sign_bytes,
        signature,
    ))
}

/// The state as FilePV writes it (two-space indent, no trailing newline).
/// A block ID ([`SignState::block_id`]) has no place there and is left out.
pub fn to_json(state: &SignState) -> String {
    let hrs = state.hrs();
    let mut out = format!(
        "{{\n  \"height\": \"{}\",\n  \"round\": {},\n  \"step\": {}",
        hrs.height,
        hrs.round,
        hrs.step.as_i8()
    );
    if !state.signature().is_empty() {
        out.push_str(",\n  \"signature\": \"");
        base64::engine::general_purpose::STANDARD.encode_string(state.signature(), &mut out);
        out.push('"');
    }
    if !state.sign_bytes().is_empty() {
        out.push_str(",\n  \"signbytes\": \"");
        out.push_str(&hex::encode_upper(state.sign_bytes()));
        out.push('"');
    }
    out.push_str("\n}");
    out
}
