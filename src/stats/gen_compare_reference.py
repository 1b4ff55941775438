"""Regenerates compare_ref.tsv, the reference for the comparison statistics of
`rollstat compare` beyond the paired t test (nct.rs, power.rs, holm.rs, binary.rs,
cr2.rs, repeats.rs, and the per-group comparison in metrics/compare.rs).

Run with numpy, scipy and statsmodels installed:

    python gen_compare_reference.py

Each row is `statistic <TAB> case <TAB> inputs <TAB> expected`, inputs and expected
being comma-separated numbers (`;` separates the tasks of a `repeats` case and the
parts of a `cr2` or `by` case). What each expected value comes from:

- nct_cdf: scipy.stats.nct.cdf(t, df, nc).
- power: statsmodels' TTestPower().power(effect_size, nobs, alpha=0.05).
  Cases where scipy returns NaN (its nctdtr fails in far tails, below about 1e-16)
  are left out; brackets of the root searches keep the noncentrality below 8 for the
  same reason.
- mde: the effect size at which statsmodels' ttest_power reaches 0.8, by
  scipy.optimize.brentq on it to 4 ulps, times sqrt(nobs) (the noncentrality); and,
  second, what statsmodels' own TTestPower().solve_power returns, which stops at its
  solver's tolerance (about 1e-10 and worse) and so is not the comparison target.
- tasks: likewise the nobs at which ttest_power(effect_size) reaches 0.8, by brentq,
  then solve_power's answer.
- holm: statsmodels' multipletests(p, method="holm")[1].
- mcnemar: statsmodels' mcnemar([[a, b], [c, d]], exact=True).pvalue, then
  scipy.stats.binomtest(b, b + c, 0.5).pvalue (the sign test on the same counts).
- wilson: statsmodels' proportion_confint(k, n, alpha=0.05, method="wilson").
- cr2: the CR2 standard error and Bell-McCaffrey degrees of freedom from the general
  matrix formulas (hat matrix, inverse square roots by eigendecomposition), numpy.
- by: per group, scipy.stats.ttest_rel(b, a) on the group's tasks: mean difference,
  standard error, t, p and the 95% interval (TtestResult.confidence_interval()).
- repeats: the variance decomposition written out with numpy (no library has it).
"""

import os

import numpy as np
import scipy
import statsmodels
from scipy import optimize, stats
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower, ttest_power
from statsmodels.stats.proportion import proportion_confint

HERE = os.path.dirname(os.path.abspath(__file__))
ALPHA, POWER = 0.05, 0.8


def nums(v):
    return ",".join(repr(float(x)) for x in v)


def brent(f, lo, hi):
    return optimize.brentq(f, lo, hi, xtol=1e-300, rtol=4 * np.finfo(float).eps, maxiter=500)


def rows():
    for df in [1, 2, 4, 9, 29, 99, 499, 4999]:
        crit = float(stats.t.ppf(0.975, df))
        for t in [crit, -crit, 0.5, -0.5, 3.0]:
            for nc in [0.5, 2.8, -2.8, 10.0]:
                yield "nct_cdf", f"df{df}", [t, df, nc], [stats.nct.cdf(t, df, nc)]
    for nobs in [2, 3, 5, 10, 30, 133, 500, 5000]:
        for es in [0.1, 0.3, 0.8, 2.0]:
            yield "power", f"n{nobs}", [es, nobs], [TTestPower().power(es, nobs, ALPHA)]
    for nobs in [3, 5, 8, 20, 40, 133, 500, 10000]:
        es = brent(lambda e: ttest_power(e, nobs, ALPHA) - POWER, 1e-6, 8.0 / np.sqrt(nobs))
        loose = TTestPower().solve_power(effect_size=None, nobs=nobs, alpha=ALPHA, power=POWER)
        yield "mde", f"n{nobs}", [nobs], [es * np.sqrt(nobs), float(np.asarray(loose).ravel()[0]) * np.sqrt(nobs)]
    for es in [0.05, 0.1, 0.2, 0.35, 0.5, 1.0, 1.5]:
        n = brent(lambda n: ttest_power(es, n, ALPHA) - POWER, 2.0, (8.0 / es) ** 2)
        loose = TTestPower().solve_power(effect_size=es, nobs=None, alpha=ALPHA, power=POWER)
        yield "tasks", f"es{es}", [es], [n, float(np.asarray(loose).ravel()[0])]
    rng = np.random.default_rng(20261201)
    for name, p in [
        ("three", [0.01, 0.04, 0.03]),
        ("ties", [0.02, 0.02, 0.5, 0.001]),
        ("capped", [0.3, 0.6, 0.45]),
        ("random12", rng.uniform(0, 0.2, 12)),
        ("tiny", [1e-40, 3e-12, 0.049]),
    ]:
        yield "holm", name, list(p), list(multipletests(p, method="holm")[1])
    for name, (a, b, c, d) in [
        ("seven_one", (10, 7, 1, 12)),
        ("const_three", (0, 3, 0, 0)),
        ("balanced", (5, 4, 4, 5)),
        ("big", (400, 60, 35, 500)),
        ("none", (9, 0, 0, 21)),
        ("one_sided", (0, 25, 0, 5)),
    ]:
        m = mcnemar(np.array([[a, b], [c, d]]), exact=True).pvalue
        s = stats.binomtest(b, b + c, 0.5).pvalue if b + c > 0 else 1.0
        yield "mcnemar", name, [a, b, c, d], [m, s]
    for k, n in [(133, 133), (0, 133), (7, 30), (1, 1), (50, 100), (999, 1000)]:
        lo, hi = proportion_confint(k, n, alpha=ALPHA, method="wilson")
        yield "wilson", f"k{k}n{n}", [k, n], [lo, hi]
    for name, sizes in [("uneven", [1, 2, 3, 7, 11, 4, 2]), ("two", [5, 9]), ("equal", [4, 4, 4, 4, 4])]:
        ids = np.concatenate([np.full(s, i) for i, s in enumerate(sizes)])
        x = rng.normal(0, 1, len(ids)) + rng.normal(0, 1, len(sizes))[ids]
        yield "cr2", name, list(x) + [float("nan")] + list(ids), list(cr2_reference(x, ids))
    # Per-group paired tests: 60 tasks in three groups of different sizes.
    groups = np.repeat([0, 1, 2], [12, 30, 18])
    a = rng.binomial(4, 0.55, 60) / 4
    b = np.clip(a + rng.choice([-0.25, 0, 0.25, 0.5], 60, p=[0.2, 0.4, 0.3, 0.1]), 0, 1)
    for g in range(3):
        m = groups == g
        r = stats.ttest_rel(b[m], a[m])
        d = b[m] - a[m]
        ci = r.confidence_interval(0.95)
        expected = [d.mean(), stats.sem(d), r.statistic, r.pvalue, ci.low, ci.high]
        yield "by", f"group{g}", list(a) + [float("nan")] + list(b) + [float("nan")] + list(groups) + [float("nan"), g], expected
    tasks = [rng.binomial(1, p, 4).astype(float) for p in rng.uniform(0.05, 0.95, 40)]
    yield "repeats", "binary4", tasks, list(repeats_reference(tasks))
    tasks = [rng.normal(mu, 0.3, k) for mu, k in zip(rng.normal(0, 1, 25), rng.integers(2, 6, 25))]
    yield "repeats", "uneven", tasks, list(repeats_reference(tasks))


def cr2_reference(x, ids):
    n = len(x)
    X = np.ones((n, 1))
    XtXi = np.linalg.inv(X.T @ X)
    H = X @ XtXi @ X.T
    e = x - x.mean()
    meat = 0.0
    cols = []
    IH = np.eye(n) - H
    for g in np.unique(ids):
        idx = np.where(ids == g)[0]
        w, V = np.linalg.eigh(np.eye(len(idx)) - H[np.ix_(idx, idx)])
        A = V @ np.diag(w**-0.5) @ V.T
        u = X[idx].T @ A @ e[idx]
        meat += float(u @ u)
        cols.append(IH[:, idx] @ A @ X[idx] @ XtXi)
    Gm = np.hstack(cols)
    lam = np.linalg.eigvalsh(Gm.T @ Gm)
    se = np.sqrt(XtXi[0, 0] * meat * XtXi[0, 0])
    return se, lam.sum() ** 2 / (lam**2).sum()


def repeats_reference(tasks):
    used = [np.asarray(t) for t in tasks if len(t) >= 2]
    means = np.array([t.mean() for t in used])
    s2 = np.array([t.var(ddof=1) for t in used])
    k = np.array([len(t) for t in used], dtype=float)
    V = means.var(ddof=1)
    W = (s2 / k).mean()
    sb = max(0.0, V - W)
    sw = s2.mean()
    K = k.mean()
    return W / V, np.sqrt((sb + sw / (2 * K)) / (sb + sw / K))


def main():
    out = []
    for stat, case, inputs, expected in rows():
        if any(np.isnan(e) for e in expected):
            # scipy's nctdtr gives NaN where a tail is below about 1e-16 (nct.cdf(-2.78,
            # 4, 10), and statsmodels' power at large effects through it): no reference.
            continue
        if stat == "repeats":
            text = ";".join(nums(t) for t in inputs)
        else:
            text = nums(inputs)
        out.append("\t".join([stat, case, text, nums(expected)]))
    with open(os.path.join(HERE, "compare_ref.tsv"), "w") as f:
        f.write(
            f"# numpy {np.__version__}, scipy {scipy.__version__}, statsmodels {statsmodels.__version__}; made by gen_compare_reference.py\n"
        )
        f.write("# statistic\tcase\tinputs\texpected\n")
        for line in out:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
