"""Regenerates welch_ref.tsv, the reference for the tests of `welch.rs`.

Run with numpy and scipy installed (the committed table came from the versions named in
its header):

    python gen_welch_reference.py

Each case stores two samples (a: candidate repeats, b: baseline repeats) and what
`scipy.stats.ttest_ind(a, b, equal_var=False)` reports for them: the Welch degrees of
freedom, the standard error, the estimate (mean(a) - mean(b)), both ends of
`.confidence_interval(0.95)` and how many "Precision loss" RuntimeWarnings scipy raised.
"""

import os
import warnings

import numpy as np
import scipy
from scipy import stats

HERE = os.path.dirname(os.path.abspath(__file__))


def cases():
    rng = np.random.default_rng(20261201)
    # Per-repeat means of binary rewards over 60 tasks, 2..8 repeats a side.
    for n_a, n_b in [(2, 2), (3, 3), (4, 4), (5, 5), (2, 7), (8, 3), (4, 6)]:
        a = rng.binomial(60, 0.42, n_a) / 60
        b = rng.binomial(60, 0.38, n_b) / 60
        yield f"binary_means_{n_a}x{n_b}", a, b
    # Continuous metrics of very different scales and spreads (df far from n - 1).
    for k, (scale_a, scale_b) in enumerate([(1.0, 1.0), (0.01, 3.0), (250.0, 4.0), (1e-6, 1e-3)]):
        a = 10.0 + rng.normal(0, scale_a, 4)
        b = 9.0 + rng.normal(0, scale_b, 5)
        yield f"continuous_scales_{k}", a, b
    # Token counts: large values, small relative spread.
    yield "tokens", 191.0 + rng.normal(0, 60, 4), 148.0 + rng.normal(0, 110, 4)
    yield "offset_1e6", 1.0e6 + rng.uniform(0, 1, 6), 1.0e6 + rng.uniform(0, 1, 3)
    # One side constant: df is that of the other side.
    yield "one_constant", np.array([0.5, 0.5, 0.5]), rng.uniform(0, 1, 4)
    # Both constant: undefined df (set to 1), zero standard error, warnings.
    yield "both_constant", np.array([28.866666666666667] * 4), np.array([28.25] * 4)
    yield "both_constant_equal", np.array([1089.5] * 4), np.array([1089.5] * 4)
    yield "both_zero", np.array([0.0, 0.0, 0.0]), np.array([0.0, 0.0])
    # Nearly identical values (relative spread below 10 eps): scipy still warns.
    x = 0.3
    yield "nearly_identical", np.array([x, x, np.nextafter(x, 1)]), rng.uniform(0, 1, 3)
    # Negative values, a long sample (pairwise sums beyond 8 values), mixed magnitudes.
    yield "negative", -rng.uniform(0, 5, 5), -rng.uniform(1, 2, 5)
    yield "long", rng.normal(0.4, 0.05, 40), rng.normal(0.45, 0.02, 150)
    yield "mixed", rng.normal(0, 1, 9) * 10.0 ** rng.integers(-3, 4, 9), rng.normal(0, 1, 11)
    yield "huge_df_ratio", np.array([1.0, 1.0 + 1e-9, 1.0 - 1e-9]), rng.normal(5, 30, 12)


def f(x):
    return repr(float(x))


def main():
    with open(os.path.join(HERE, "welch_ref.tsv"), "w") as fh:
        fh.write(f"# numpy {np.__version__}, scipy {scipy.__version__}; made by gen_welch_reference.py\n")
        fh.write("# case\ta\tb\tdf\tse\testimate\tlow\thigh\tprecision_loss_warnings\n")
        for name, a, b in cases():
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                r = stats.ttest_ind(a, b, equal_var=False)
                ci = r.confidence_interval(confidence_level=0.95)
            losses = sum("Precision loss" in str(w.message) for w in caught)
            row = [
                name,
                ",".join(f(x) for x in a),
                ",".join(f(x) for x in b),
                f(r.df),
                f(r._standard_error),
                f(r._estimate),
                f(ci.low),
                f(ci.high),
                str(losses),
            ]
            fh.write("\t".join(row) + "\n")


if __name__ == "__main__":
    main()
