//! `AuthSigMessage` encoding and decoding, and the protobuf varint helpers the
//! handshake needs. A small hand-written codec: the only messages are fixed and
//! tiny, and it keeps protobuf code generation out of the build.
//!
//! ```text
//! AuthSigMessage { PublicKey pub_key = 1; bytes sig = 2; }
//! PublicKey      { oneof sum { bytes ed25519 = 1; bytes secp256k1 = 2; bytes bls12381 = 3;
//!                              bytes mldsa65 = 4; bytes secp256k1eth = 5; } }
//! Ed25519 on the wire (103 bytes with the delimiting prefix):
//!   66 | 0a 22 | 0a 20 <public key 32> | 12 40 <signature 64>
//! ```
//!
//! Decoding follows protobuf rules as CometBFT's gogoproto does: fields in any
//! order, the last occurrence wins, unknown fields are skipped. Only an Ed25519
//! key of exactly 32 bytes and a signature of exactly 64 bytes are accepted.

use super::error::ProtocolError;
use super::varint::{read_uvarint, Varint};

pub(crate) use super::wire::{AUTH_SIG_MSG_LEN, MAX_AUTH_SIG_BODY};

/// Encode the delimited AuthSigMessage for an Ed25519 key.
pub fn encode(public_key: &[u8; 32], signature: &[u8; 64]) -> [u8; AUTH_SIG_MSG_LEN] {
    let mut m = [0u8; AUTH_SIG_MSG_LEN];
    m[..5].copy_from_slice(&[0x66, 0x0a, 0x22, 0x0a, 0x20]);
    m[5..37].copy_from_slice(public_key);
    m[37..39].copy_from_slice(&[0x12, 0x40]);
    m[39..].copy_from_slice(signature);
    m
}

fn malformed(msg: impl Into<String>) -> ProtocolError {
    ProtocolError::MalformedAuthMessage(msg.into())
}

/// One protobuf field: number and, for length-delimited fields, the payload.
struct Field<'a> {
    number: u64,
    payload: Option<&'a [u8]>,
}

/// Iterate the fields of a protobuf message body.
fn next_field<'a>(buf: &mut &'a [u8]) -> Result<Option<Field<'a>>, ProtocolError> {
    if buf.is_empty() {
        return Ok(None);
    }
    let (tag, used) = match read_uvarint(buf) {
        Varint::Value(v, n) => (v, n),
        _ => return Err(malformed("truncated or overlong field tag")),
    };
    *buf = &buf[used..];
    let number = tag >> 3;
    if number == 0 {
        return Err(malformed("field number 0"));
    }
    let payload = match tag & 7 {
        0 => {
            match read_uvarint(buf) {
                Varint::Value(_, n) => *buf = &buf[n..],
                _ => return Err(malformed("truncated varint field")),
            }
            None
        }
        1 | 5 => {
            let n = if tag & 7 == 1 { 8 } else { 4 };
            if buf.len() < n {
                return Err(malformed("truncated fixed-width field"));
            }
            *buf = &buf[n..];
            None
        }
        2 => {
            let (len, n) = match read_uvarint(buf) {
                Varint::Value(v, n) => (v, n),
                _ => return Err(malformed("truncated length of a bytes field")),
            };
            let rest = &buf[n..];
            if len > rest.len() as u64 {
                return Err(malformed("bytes field runs past the end of the message"));
            }
            let (p, tail) = rest.split_at(len as usize);
            *buf = tail;
            Some(p)
        }
        wt => return Err(malformed(format!("unsupported wire type {wt}"))),
    };
    Ok(Some(Field { number, payload }))
}

fn bytes_field<'a>(f: &Field<'a>, what: &str) -> Result<&'a [u8], ProtocolError> {
    f.payload
        .ok_or_else(|| malformed(format!("{what} has the wrong wire type")))
}

/// Decode an AuthSigMessage body (without its length prefix) into the peer's
/// Ed25519 public key and signature.
pub fn decode(body: &[u8]) -> Result<([u8; 32], [u8; 64]), ProtocolError> {
    let mut buf = body;
    let mut pub_key: Option<&[u8]> = None;
    let mut sig: Option<&[u8]> = None;
    while let Some(f) = next_field(&mut buf)? {
        match f.number {
            1 => pub_key = Some(bytes_field(&f, "pub_key")?),
            2 => sig = Some(bytes_field(&f, "sig")?),
            _ => {}
        }
    }
    // PublicKey's oneof: the last member present wins.
    let mut key: Option<(u64, &[u8])> = None;
    let mut pk_buf = pub_key.unwrap_or(&[]);
    while let Some(f) = next_field(&mut pk_buf)? {
        if (1..=5).contains(&f.number) {
            key = Some((f.number, bytes_field(&f, "public key")?));
        }
    }
    let key = match key {
        None => return Err(ProtocolError::UnsupportedKeyType("no public key".into())),
        Some((1, k)) => k,
        Some((n, _)) => {
            let name = match n {
                2 => "secp256k1",
                3 => "bls12381",
                4 => "mldsa65",
                _ => "secp256k1eth",
            };
            return Err(ProtocolError::UnsupportedKeyType(name.into()));
        }
    };
    let key: [u8; 32] = key.try_into().map_err(|_| {
        malformed(format!(
            "Ed25519 public key is {} bytes, expected 32",
            key.len()
        ))
    })?;
    let sig = sig.unwrap_or(&[]);
    let sig: [u8; 64] = sig
        .try_into()
        .map_err(|_| malformed(format!("signature is {} bytes, expected 64", sig.len())))?;
    Ok((key, sig))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_layout() {
        let pk = [1u8; 32];
        let sig = [2u8; 64];
        let m = encode(&pk, &sig);
        assert_eq!(m[0] as usize, AUTH_SIG_MSG_LEN - 1);
        assert_eq!(decode(&m[1..]).unwrap(), (pk, sig));
    }

    #[test]
    fn varints() {
        assert_eq!(read_uvarint(&[0x66]), Varint::Value(102, 1));
        assert_eq!(read_uvarint(&[0xe6, 0x00]), Varint::Value(102, 2));
        assert_eq!(read_uvarint(&[0x80]), Varint::Incomplete);
        assert_eq!(read_uvarint(&[]), Varint::Incomplete);
        assert_eq!(read_uvarint(&[0xff; 10]), Varint::Overflow);
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(read_uvarint(&max), Varint::Value(u64::MAX, 10));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(read_uvarint(&over), Varint::Overflow);
    }

    #[test]
    fn field_order_unknown_fields_and_last_wins() {
        let pk = [7u8; 32];
        let sig = [8u8; 64];
        let mut body = vec![0x12, 0x40];
        body.extend_from_slice(&[0u8; 64]); // an earlier sig, overridden below
        body.extend_from_slice(&[0x18, 0x96, 0x01]); // unknown varint field 3
        body.extend_from_slice(&[0x12, 0x40]);
        body.extend_from_slice(&sig);
        body.extend_from_slice(&[0x0a, 0x22, 0x0a, 0x20]);
        body.extend_from_slice(&pk);
        assert_eq!(decode(&body).unwrap(), (pk, sig));
    }

    #[test]
    fn rejections() {
        let pk = [7u8; 32];
        let sig = [8u8; 64];
        // secp256k1 key (33 bytes) in oneof field 2
        let mut body = vec![0x0a, 0x23, 0x12, 0x21];
        body.extend_from_slice(&[2u8; 33]);
        body.extend_from_slice(&[0x12, 0x40]);
        body.extend_from_slice(&sig);
        assert_eq!(
            decode(&body),
            Err(ProtocolError::UnsupportedKeyType("secp256k1".into()))
        );
        // no key at all
        let mut body = vec![0x12, 0x40];
        body.extend_from_slice(&sig);
        assert!(matches!(
            decode(&body),
            Err(ProtocolError::UnsupportedKeyType(_))
        ));
        // short key
        let mut body = vec![0x0a, 0x21, 0x0a, 0x1f];
        body.extend_from_slice(&pk[..31]);
        body.extend_from_slice(&[0x12, 0x40]);
        body.extend_from_slice(&sig);
        assert!(matches!(
            decode(&body),
            Err(ProtocolError::MalformedAuthMessage(_))
        ));
        // short signature
        let mut m = encode(&pk, &sig).to_vec();
        m.truncate(100);
        m[38] = 0x3d;
        m[2] = 0x22;
        let body = &m[1..];
        assert!(matches!(
            decode(body),
            Err(ProtocolError::MalformedAuthMessage(_))
        ));
        // truncated, wrong wire type, group wire type
        let m = encode(&pk, &sig);
        assert!(decode(&m[1..50]).is_err());
        assert!(decode(&[0x08, 0x01]).is_err());
        assert!(decode(&[0x0b]).is_err());
        assert!(decode(&[0x00]).is_err());
    }
}
