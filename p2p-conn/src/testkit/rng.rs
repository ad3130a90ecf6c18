//! Deterministic randomness for fault plans and payloads.

/// splitmix64: deterministic randomness for fault plans and payloads.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    /// True with probability `pct` / 100.
    pub fn percent(&mut self, pct: u32) -> bool {
        self.next_u64() % 100 < u64::from(pct)
    }
}

/// `len` pseudo-random bytes; different seeds differ from the first byte on
/// with overwhelming probability.
pub fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed ^ 0x5eed_0000_0000_0000);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    out.truncate(len);
    out
}
