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

/// One case of `compare_ref.tsv`: its name, inputs (the parts between `nan` separators,
/// or the tasks of a `repeats` case) and expected values.
pub struct RefCase {
    pub case: String,
    pub parts: Vec<Vec<f64>>,
    pub expected: Vec<f64>,
}

/// The cases of `compare_ref.tsv` for one statistic.
pub fn compare_ref(stat: &str) -> Vec<RefCase> {
    let nums = |s: &str| s.split(',').map(py_float).collect::<Vec<f64>>();
    let cases: Vec<RefCase> = rows(include_str!("compare_ref.tsv"))
        .filter(|r| r[0] == stat)
        .map(|r| {
            let parts = if stat == "repeats" {
                r[2].split(';').map(nums).collect()
            } else {
                nums(r[2]).split(|v| v.is_nan()).map(<[f64]>::to_vec).collect()
            };
            RefCase { case: r[1].to_string(), parts, expected: nums(r[3]) }
        })
        .collect();
    assert!(!cases.is_empty(), "no {stat} cases");
    cases
}

/// Checks `got` against `want` within `tol`, relative to `max(|want|, floor)`; returns
/// the absolute and relative differences.
pub fn agree(got: f64, want: f64, tol: f64, floor: f64, what: &str) -> (f64, f64) {
    let abs = (got - want).abs();
    let abs = if got == want { 0.0 } else { abs };
    assert!(abs <= tol * want.abs().max(floor), "{what}: got {got:e}, want {want:e} (diff {abs:e})");
    (abs, rel_err(got, want))
}
