"""Regenerates paired_ref.tsv, the reference for the tests of `paired.rs`.

Run with numpy, scipy and statsmodels installed:

    python gen_paired_reference.py

Each case stores its data (per-task values of runs a and b and a cluster id per task)
and what scipy and statsmodels report for it: the clustered standard errors come from
statsmodels' `OLS(x, ones).fit(cov_type="cluster")`, the unclustered ones from
`scipy.stats.sem`, the paired test from `scipy.stats.ttest_rel(b, a)` (unclustered) or
`2 * t.sf(|t|, G - 1)` (clustered), the correlation from `scipy.stats.pearsonr`.
"""

import os

import numpy as np
import scipy
import statsmodels
import statsmodels.api as sm
from scipy import stats

HERE = os.path.dirname(os.path.abspath(__file__))


def cluster_se(x, groups):
    fit = sm.OLS(np.asarray(x), np.ones(len(x))).fit(cov_type="cluster", cov_kwds={"groups": np.asarray(groups)})
    return float(fit.bse[0])


def cases():
    rng = np.random.default_rng(20261130)
    # Binary rewards, 40 tasks x 4 repeats averaged, 8 clusters of 5 tasks.
    difficulty = rng.uniform(0.05, 0.95, 40)
    a = rng.binomial(4, difficulty) / 4
    b = rng.binomial(4, np.clip(difficulty + 0.08, 0, 1)) / 4
    yield "binary_clustered", a, b, np.repeat(np.arange(8), 5)
    yield "binary_unclustered", a, b, None
    # Continuous scores with cluster effects, uneven cluster sizes.
    sizes = [1, 2, 3, 7, 11, 4, 2]
    ids = np.concatenate([np.full(s, i * 3 + 1) for i, s in enumerate(sizes)])
    effect = rng.normal(0, 0.3, len(sizes))[np.concatenate([np.full(s, i) for i, s in enumerate(sizes)])]
    a = effect + rng.normal(0.2, 0.1, len(ids))
    b = effect + rng.normal(0.25, 0.1, len(ids))
    yield "continuous_uneven_clusters", a, b, ids
    # A large case where b barely differs: p near 1.
    a = rng.uniform(0, 1, 500)
    b = a + rng.normal(0, 1e-3, 500)
    yield "tiny_difference", a, b, None
    # A large effect: p far below 1e-10.
    a = rng.uniform(0, 0.5, 300)
    b = a + 0.2 + rng.normal(0, 0.05, 300)
    yield "large_effect", a, b, np.arange(300) // 3
    # Two tasks, two clusters: the smallest case with a standard error.
    yield "two_tasks", np.array([0.25, 0.75]), np.array([0.5, 0.5]), np.array([0, 1])


def fmt(v):
    return "" if v is None else repr(float(v))


def main():
    rows = []
    for name, a, b, ids in cases():
        d = b - a
        n = len(a)
        if ids is None:
            se_a, se_b, se_d = (float(stats.sem(v)) for v in (a, b, d))
            test = stats.ttest_rel(b, a)
            t, p = float(test.statistic), float(test.pvalue)
            g = n
        else:
            se_a, se_b, se_d = (cluster_se(v, ids) for v in (a, b, d))
            g = len(set(ids.tolist()))
            t = float(d.mean() / se_d)
            p = float(2 * stats.t.sf(abs(t), g - 1))
        r = float(stats.pearsonr(a, b).statistic)
        rows.append(
            [
                name,
                ",".join(repr(float(v)) for v in a),
                ",".join(repr(float(v)) for v in b),
                "" if ids is None else ",".join(str(int(i)) for i in ids),
                str(g),
                fmt(a.mean()),
                fmt(b.mean()),
                fmt(d.mean()),
                fmt(se_a),
                fmt(se_b),
                fmt(se_d),
                fmt(t),
                fmt(p),
                fmt(r),
            ]
        )
    with open(os.path.join(HERE, "paired_ref.tsv"), "w") as f:
        f.write(
            f"# numpy {np.__version__}, scipy {scipy.__version__}, statsmodels {statsmodels.__version__}; made by gen_paired_reference.py\n"
        )
        f.write("# case\ta\tb\tclusters\tG\tmean_a\tmean_b\tdiff\tse_a\tse_b\tse_diff\tt\tp\tpearson\n")
        for r in rows:
            f.write("\t".join(r) + "\n")


if __name__ == "__main__":
    main()
