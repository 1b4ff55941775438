//! Small deterministic random number generation for the sweep generator.
//!
//! Everything random in a generated sweep is derived from `hash(&[seed, ...])`
//! of stable coordinates (task index, rollout index, batch index), never from
//! the order in which threads happen to run, so the output is byte-identical
//! whatever the thread count.

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The splitmix64 finaliser: a strong 64-bit bit mixer.
pub(super) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes a sequence of words into one well-mixed seed.
pub(crate) fn hash(parts: &[u64]) -> u64 {
    let mut h: u64 = 0x243F_6A88_85A3_08D3;
    for &p in parts {
        h = mix64(h ^ mix64(p.wrapping_add(GOLDEN)));
    }
    h
}

/// A hash (from [`hash`]) as a number uniform in the open interval (0, 1), with 53
/// bits of precision: never 0, so its logarithm is finite.
pub(crate) fn open_unit(h: u64) -> f64 {
    ((h >> 11) as f64 + 0.5) * (1.0 / (1u64 << 53) as f64)
}

/// splitmix64 generator: tiny state, fast, good enough statistical quality
/// for synthetic data.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix64(self.0)
    }

    /// Uniform in [0, 1) with 53 bits of precision.
    pub(super) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [0, n) (n > 0), by multiply-shift.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in [lo, hi] inclusive.
    pub(super) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability p (p <= 0: never, p >= 1: always).
    pub(super) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Approximately standard normal (Irwin–Hall with four terms, rescaled).
    pub(super) fn normal(&mut self) -> f64 {
        let s = self.unit() + self.unit() + self.unit() + self.unit();
        (s - 2.0) * 3f64.sqrt()
    }

    pub(super) fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_and_below_stay_in_range() {
        let mut r = Rng::new(hash(&[1, 2, 3]));
        for _ in 0..10_000 {
            let u = r.unit();
            assert!((0.0..1.0).contains(&u));
            assert!(r.below(7) < 7);
            let x = r.range(3, 5);
            assert!((3..=5).contains(&x));
        }
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
    }

    #[test]
    fn hash_depends_on_every_part() {
        assert_ne!(hash(&[1, 2]), hash(&[2, 1]));
        assert_ne!(hash(&[1, 2]), hash(&[1, 2, 0]));
        assert_eq!(hash(&[5, 6]), hash(&[5, 6]));
    }
}
