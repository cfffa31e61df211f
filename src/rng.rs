//! SplitMix64, the one deterministic generator: workloads are built from seeds, trial order is
//! shuffled from a seed, and the report's bootstrap resamples from one. Written out (rather than
//! `rand`) so every stream is specified exactly: workload prompts are pinned by hashes, and the
//! scipy check replays the bootstrap's index stream.

/// Sebastiano Vigna's SplitMix64.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform index in `0..n` by multiply-shift (Lemire); the bias is below 2^-40 for any
    /// realistic `n` and the mapping is trivial to replay elsewhere. Used by the bootstrap.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// Index in `0..n` (`n > 0`) by modulo. Workloads were built with this mapping and their
    /// prompts are pinned by hashes, so it stays as it is.
    pub fn below_modulo(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// Uniform float in [0, 1) with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Fisher–Yates shuffle (with [`Self::below_modulo`], as workloads were built).
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below_modulo(i + 1);
            items.swap(i, j);
        }
    }
}
