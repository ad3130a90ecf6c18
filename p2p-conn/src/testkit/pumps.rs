//! Handshake pumps: [`Handshake`] state machines driven against each other
//! in memory, with no transport, and RNGs that make every byte repeatable.

use rand_core::SeedableRng;

use crate::proto::{Established, Handshake, HandshakeParams, ProtocolError};
use crate::Identity;

/// A ChaCha20 RNG seeded from `seed`: a real CSPRNG with a known seed, for
/// repeatable handshakes in tests and fuzz targets.
pub fn seeded_rng(seed: u64) -> rand_chacha::ChaCha20Rng {
    rand_chacha::ChaCha20Rng::seed_from_u64(seed)
}

/// An identity and a handshake whose every byte follows from `seed`.
pub fn deterministic_handshake(seed: u64, params: HandshakeParams) -> (Identity, Handshake) {
    let mut rng = seeded_rng(seed);
    let mut identity_seed = [0u8; 32];
    rand_core::RngCore::fill_bytes(&mut rng, &mut identity_seed);
    let identity = Identity::from_seed(&identity_seed);
    let hs = Handshake::new_with_rng(&identity, params, &mut rng);
    (identity, hs)
}

/// Feed `bytes` into the handshake's read side, in as few calls as it allows.
/// Stops with an error if the handshake wants no more input while bytes are
/// left (a [`ProtocolError::Misuse`]).
pub fn feed(hs: &mut Handshake, mut bytes: &[u8]) -> Result<(), ProtocolError> {
    while !bytes.is_empty() {
        let buf = hs.read_buffer();
        if buf.is_empty() {
            return Err(ProtocolError::Misuse("the handshake wants no more input"));
        }
        let n = buf.len().min(bytes.len());
        buf[..n].copy_from_slice(&bytes[..n]);
        hs.advance_read(n)?;
        bytes = &bytes[n..];
    }
    Ok(())
}

/// Move up to `max` bytes of what `from` has to send into `to` (no more than
/// `to` asks for), append them to `wire`, and return how many moved.
pub fn pump(
    from: &mut Handshake,
    to: &mut Handshake,
    max: usize,
    wire: &mut Vec<u8>,
) -> Result<usize, ProtocolError> {
    let out = from.outgoing();
    let want = to.read_buffer();
    let n = out.len().min(want.len()).min(max);
    want[..n].copy_from_slice(&out[..n]);
    wire.extend_from_slice(&out[..n]);
    from.advance_outgoing(n);
    to.advance_read(n)?;
    Ok(n)
}

/// What [`run_handshakes`] returns: both sides' results and every byte each
/// side sent.
#[derive(Debug)]
pub struct HandshakeRun {
    pub a: Established,
    pub b: Established,
    pub a_wire: Vec<u8>,
    pub b_wire: Vec<u8>,
}

/// Drive two handshakes against each other, `chunk` bytes at a time per
/// direction (1 exercises every split point), to completion.
pub fn run_handshakes(
    mut a: Handshake,
    mut b: Handshake,
    chunk: usize,
) -> Result<HandshakeRun, ProtocolError> {
    let (mut a_wire, mut b_wire) = (Vec::new(), Vec::new());
    while !(a.is_finished() && b.is_finished()) {
        let moved = pump(&mut a, &mut b, chunk.max(1), &mut a_wire)?
            + pump(&mut b, &mut a, chunk.max(1), &mut b_wire)?;
        if moved == 0 {
            return Err(ProtocolError::Misuse("the handshakes stalled"));
        }
    }
    Ok(HandshakeRun {
        a: a.into_established()?,
        b: b.into_established()?,
        a_wire,
        b_wire,
    })
}
