//! Test-only helpers: the LCG data sets that `gen_reference.py` also
//! generates, and readers for the reference tables it wrote (numpy 2.4.6,
//! pandas 3.1.1 and scipy 1.17.1, run on this machine).

/// The 64-bit LCG of `gen_reference.py` (Knuth's MMIX constants).
pub struct Lcg(u64);

impl Lcg {
    pub fn new(seed: u64) -> Self {
        Lcg(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        self.0
    }

    /// Uniform in [0, 1) with 53 random bits (exact in both languages).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / 9_007_199_254_740_992.0)
    }
}

const POW: [f64; 10] = [1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6];

/// Data set `kind` ("mixed", "offset" or "reward") of length `n`, exactly
/// as `dataset()` in `gen_reference.py`.
pub fn dataset(kind: &str, n: usize) -> Vec<f64> {
    let tag = match kind {
        "mixed" => 1,
        "offset" => 2,
        "reward" => 3,
        _ => panic!("unknown data set {kind}"),
    };
    let mut rng = Lcg::new(n as u64 * 1000 + tag);
    (0..n)
        .map(|_| {
            let u = rng.unit();
            let k = ((rng.next_u64() >> 33) % 10) as usize;
            match tag {
                1 => (u - 0.5) * POW[k],
                2 => 1.0e6 + u,
                _ => (k % 3) as f64 * 0.5,
            }
        })
        .collect()
}

/// Non-comment, non-empty lines of a TSV table split on tabs.
pub fn rows(table: &str) -> impl Iterator<Item = Vec<&str>> {
    table.lines().filter(|l| !l.is_empty() && !l.starts_with('#')).map(|l| l.split('\t').collect())
}

/// The rows of `numpy_ref.tsv` grouped by data set: for each
/// `(kind, n)` in table order, the regenerated data and its rows
/// (`[kind, n, stat, param, value]`).
pub fn numpy_groups(table: &str) -> Vec<(Vec<f64>, Vec<Vec<&str>>)> {
    let mut groups: Vec<(Vec<f64>, Vec<Vec<&str>>)> = Vec::new();
    let mut key: Option<(&str, &str)> = None;
    for row in rows(table) {
        if key != Some((row[0], row[1])) {
            key = Some((row[0], row[1]));
            groups.push((dataset(row[0], row[1].parse().unwrap()), Vec::new()));
        }
        groups.last_mut().unwrap().1.push(row);
    }
    groups
}

/// Parses a Python `repr(float)` (`nan`, `inf`, `-inf` or a decimal).
pub fn py_float(s: &str) -> f64 {
    s.parse().unwrap_or_else(|_| panic!("bad float in table: {s:?}"))
}

/// Relative difference `|got - want| / |want|` (absolute when `want == 0`).
pub fn rel_err(got: f64, want: f64) -> f64 {
    if got == want {
        0.0
    } else if want == 0.0 {
        got.abs()
    } else {
        ((got - want) / want).abs()
    }
}

#[test]
fn lcg_matches_python() {
    // First draws of Lcg(1) as printed by the Python implementation.
    let mut rng = Lcg::new(1);
    assert_eq!(rng.next_u64(), 7_806_831_264_735_756_412);
}
