//! libp2p's Noise handshake payload, `NoiseHandshakePayload`
//! (go-libp2p `p2p/security/noise/pb/payload.proto`):
//!
//! ```text
//! identity_key = 1  bytes   libp2p PublicKey { Type = 1 (varint), Data = 2 (bytes) }
//! identity_sig = 2  bytes   Ed25519 over "noise-libp2p-static-key:" ‖ Noise static key
//! extensions   = 4  message ignored (early data, stream muxers)
//! ```
//!
//! Written and read by hand: three fields, and a reader that refuses
//! what it cannot walk rather than guessing.

use super::NoiseError;
use crate::identity::PublicKey;

/// What is signed: this prefix, then the sender's Noise static public key.
pub(super) const SIG_PREFIX: &[u8] = b"noise-libp2p-static-key:";

/// libp2p's key type number of Ed25519.
const ED25519: u64 = 1;

/// The payload for our static key `static_pub`, signed by `identity`.
pub(super) fn encode(identity: &crate::Identity, static_pub: &[u8; 32]) -> Vec<u8> {
    let mut msg = Vec::with_capacity(SIG_PREFIX.len() + 32);
    msg.extend_from_slice(SIG_PREFIX);
    msg.extend_from_slice(static_pub);
    let sig = identity.sign(&msg);
    let mut out = Vec::with_capacity(2 + 36 + 2 + 64);
    // identity_key: 08 01 (Type = Ed25519) 12 20 (Data, 32 bytes) ‖ key.
    out.extend_from_slice(&[0x0a, 36, 0x08, 0x01, 0x12, 0x20]);
    out.extend_from_slice(identity.public_key().as_bytes());
    out.extend_from_slice(&[0x12, 64]);
    out.extend_from_slice(&sig);
    out
}

/// The sender's Ed25519 key, once its signature over `static_pub` checks.
pub(super) fn verify(payload: &[u8], static_pub: &[u8]) -> Result<PublicKey, NoiseError> {
    let mut key = None;
    let mut sig = None;
    for field in Fields(payload) {
        match field? {
            (1, Value::Bytes(b)) => key = Some(b),
            (2, Value::Bytes(b)) => sig = Some(b),
            (1 | 2 | 4, Value::Other) => {
                return Err(NoiseError::Payload("a field of the wrong type"))
            }
            _ => {}
        }
    }
    let key = public_key(key.ok_or(NoiseError::Payload("no identity key"))?)?;
    let sig: [u8; 64] = sig
        .ok_or(NoiseError::Payload("no identity signature"))?
        .try_into()
        .map_err(|_| NoiseError::BadSignature)?;
    let mut msg = Vec::with_capacity(SIG_PREFIX.len() + static_pub.len());
    msg.extend_from_slice(SIG_PREFIX);
    msg.extend_from_slice(static_pub);
    let vk = ed25519_dalek::VerifyingKey::from_bytes(key.as_bytes())
        .map_err(|_| NoiseError::Payload("an Ed25519 key that is not a curve point"))?;
    use ed25519_dalek::Verifier as _;
    vk.verify(&msg, &ed25519_dalek::Signature::from_bytes(&sig))
        .map_err(|_| NoiseError::BadSignature)?;
    Ok(key)
}

/// libp2p's `PublicKey` message: Ed25519 only.
fn public_key(bytes: &[u8]) -> Result<PublicKey, NoiseError> {
    let mut kind = None;
    let mut data = None;
    for field in Fields(bytes) {
        match field? {
            (1, Value::Varint(v)) => kind = Some(v),
            (2, Value::Bytes(b)) => data = Some(b),
            (1 | 2, _) => return Err(NoiseError::Payload("a key field of the wrong type")),
            _ => {}
        }
    }
    match kind {
        Some(ED25519) => {}
        Some(other) => return Err(NoiseError::KeyType(other)),
        None => return Err(NoiseError::Payload("a key without a type")),
    }
    let data: [u8; 32] = data
        .ok_or(NoiseError::Payload("a key without data"))?
        .try_into()
        .map_err(|_| NoiseError::Payload("an Ed25519 key of other than 32 bytes"))?;
    Ok(PublicKey::from_bytes(data))
}

enum Value<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    /// Fixed 32- or 64-bit: skipped.
    Other,
}

/// The fields of a protobuf message, in order; an error ends the walk.
struct Fields<'a>(&'a [u8]);

impl<'a> Iterator for Fields<'a> {
    type Item = Result<(u64, Value<'a>), NoiseError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let r = self.field();
        if r.is_err() {
            self.0 = &[];
        }
        Some(r)
    }
}

impl<'a> Fields<'a> {
    fn field(&mut self) -> Result<(u64, Value<'a>), NoiseError> {
        let tag = self.varint()?;
        let number = tag >> 3;
        if number == 0 {
            return Err(NoiseError::Payload("field number 0"));
        }
        let value = match tag & 7 {
            0 => Value::Varint(self.varint()?),
            1 => {
                self.take(8)?;
                Value::Other
            }
            2 => {
                let len = self.varint()?;
                let len = usize::try_from(len)
                    .map_err(|_| NoiseError::Payload("a length past the end"))?;
                Value::Bytes(self.take(len)?)
            }
            5 => {
                self.take(4)?;
                Value::Other
            }
            _ => return Err(NoiseError::Payload("a wire type it cannot skip")),
        };
        Ok((number, value))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], NoiseError> {
        if n > self.0.len() {
            return Err(NoiseError::Payload("a length past the end"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn varint(&mut self) -> Result<u64, NoiseError> {
        let mut v = 0u64;
        for i in 0..10 {
            let (&b, rest) = self
                .0
                .split_first()
                .ok_or(NoiseError::Payload("a truncated varint"))?;
            self.0 = rest;
            if i == 9 && b > 1 {
                return Err(NoiseError::Payload("a varint over 64 bits"));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(NoiseError::Payload("a varint over 64 bits"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_payload_verifies_and_a_changed_key_does_not() {
        let id = crate::Identity::from_seed(&[7; 32]);
        let p = encode(&id, &[9; 32]);
        assert_eq!(verify(&p, &[9; 32]).unwrap(), id.public_key());
        assert!(matches!(
            verify(&p, &[8; 32]),
            Err(NoiseError::BadSignature)
        ));
    }

    #[test]
    fn extensions_and_unknown_fields_are_skipped() {
        let id = crate::Identity::from_seed(&[7; 32]);
        let mut p = encode(&id, &[9; 32]);
        p.extend_from_slice(&[0x22, 0x00, 0x28, 0x05, 0x35, 1, 2, 3, 4]);
        assert!(verify(&p, &[9; 32]).is_ok());
    }

    #[test]
    fn a_secp256k1_key_is_refused_by_type() {
        let mut p = vec![0x0a, 37, 0x08, 0x02, 0x12, 33];
        p.extend_from_slice(&[2; 33]);
        p.extend_from_slice(&[0x12, 64]);
        p.extend_from_slice(&[0; 64]);
        assert!(matches!(verify(&p, &[9; 32]), Err(NoiseError::KeyType(2))));
    }

    #[test]
    fn truncations_are_errors_never_panics() {
        let id = crate::Identity::from_seed(&[7; 32]);
        let p = encode(&id, &[9; 32]);
        for n in 0..p.len() {
            assert!(verify(&p[..n], &[9; 32]).is_err(), "{n}");
        }
    }
}
