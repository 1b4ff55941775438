"""Regenerates the reference tables used by the tests in this directory.

Run with numpy, pandas and scipy installed (the committed tables came from
numpy 2.4.6, pandas 3.1.1 and scipy 1.17.1 on CPython 3.11):

    python gen_reference.py

It writes t_ppf_0975.tsv, t_ref_extra.tsv, t_interval.tsv and numpy_ref.tsv
next to itself. The data sets for numpy_ref.tsv come from the 64-bit LCG that
the Rust tests re-implement (see `test_data.rs`), so only results are stored.
"""

import os

import numpy as np
import pandas as pd
import scipy
from scipy import stats

HERE = os.path.dirname(os.path.abspath(__file__))
MASK64 = (1 << 64) - 1
POW = [1e-3, 1e-2, 1e-1, 1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6]
HEADER = f"# numpy {np.__version__}, pandas {pd.__version__}, scipy {scipy.__version__}; made by gen_reference.py\n"


class Lcg:
    def __init__(self, seed):
        self.state = seed & MASK64

    def next_u64(self):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) & MASK64
        return self.state

    def unit(self):
        return (self.next_u64() >> 11) * (1.0 / 9007199254740992.0)


def dataset(kind, n):
    rng = Lcg(n * 1000 + {"mixed": 1, "offset": 2, "reward": 3}[kind])
    out = []
    for _ in range(n):
        u = rng.unit()
        k = (rng.next_u64() >> 33) % 10
        if kind == "mixed":
            out.append((u - 0.5) * POW[k])
        elif kind == "offset":
            out.append(1.0e6 + u)
        else:
            out.append((k % 3) * 0.5)
    return np.array(out, dtype=np.float64)


def f(x):
    return repr(float(x))


def t_tables():
    with open(os.path.join(HERE, "t_ppf_0975.tsv"), "w") as fh:
        fh.write(HEADER)
        fh.write("# p\tdf\tscipy.stats.t.ppf(p, df)\n")
        for df in range(1, 1001):
            fh.write(f"0.975\t{df}\t{f(stats.t.ppf(0.975, df))}\n")
        q1 = (1.0 - 0.95) / 2.0
        for df in [1, 2, 3, 4, 5, 7, 10, 29, 30, 100, 999, 1000]:
            fh.write(f"{f(q1)}\t{df}\t{f(stats.t.ppf(q1, df))}\n")
    with open(os.path.join(HERE, "t_ref_extra.tsv"), "w") as fh:
        fh.write(HEADER)
        fh.write("# p\tdf\tscipy.stats.t.ppf(p, df)\n")
        ps = [0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 0.1, 0.0001, 0.6, 0.51]
        dfs = list(range(1, 31)) + [40, 50, 60, 80, 100, 120, 200, 300, 500, 750, 1000]
        dfs += [1.5, 2.5, 3.7, 7.25, 12.9, 55.5, 123.456, 999.5]
        dfs += [2000, 10000, 100000, 1000000, 10000000]
        for df in dfs:
            for p in ps:
                fh.write(f"{f(p)}\t{f(df)}\t{f(stats.t.ppf(p, df))}\n")
        for p in [1e-10, 1e-30, 1e-100, 0.999999999]:
            for df in [3, 5, 10, 100]:
                fh.write(f"{f(p)}\t{f(df)}\t{f(stats.t.ppf(p, df))}\n")
        for p in [0.975, 0.9, 0.5000001]:
            fh.write(f"{f(p)}\tinf\t{f(stats.t.ppf(p, np.inf))}\n")
    with open(os.path.join(HERE, "t_interval.tsv"), "w") as fh:
        fh.write(HEADER)
        fh.write("# confidence\tdf\tloc\tscale\tlow\thigh  (scipy.stats.t.interval)\n")
        triples = [
            (0.95, 1, 0.5, 0.5),
            (0.95, 2, 0.25, 0.125),
            (0.95, 4, 0.7333333333333333, 0.06666666666666667),
            (0.95, 9, 0.61, 0.0459468292795964),
            (0.95, 31, -3.25, 1.5e-3),
            (0.95, 99, 0.4712, 0.049922),
            (0.95, 499, 1234.5678, 12.3456),
            (0.95, 999, 0.123456789, 0.0001),
            (0.90, 15, 10.0, 2.0),
            (0.99, 7, -1.0, 0.3),
            (0.95, 17.5, 0.2, 0.05),
        ]
        for conf, df, loc, scale in triples:
            lo, hi = stats.t.interval(conf, df, loc=loc, scale=scale)
            fh.write(f"{f(conf)}\t{f(df)}\t{f(loc)}\t{f(scale)}\t{f(lo)}\t{f(hi)}\n")


def numpy_table():
    sizes = [1, 2, 3, 7, 8, 9, 15, 16, 17, 100, 127, 128, 129, 130, 200, 255, 256, 257,
             1000, 1001, 4097, 100003]
    qs = [0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.975, 0.99, 1.0, 1.0 / 3.0, 0.123456789, 0.7]
    with open(os.path.join(HERE, "numpy_ref.tsv"), "w") as fh:
        fh.write(HEADER)
        fh.write("# dataset\tn\tstat\tparam\tvalue   (masked stats: NaN where i % 7 == 3)\n")
        for kind in ["mixed", "offset", "reward"]:
            for n in sizes:
                a = dataset(kind, n)
                s = pd.Series(a)
                masked = a.copy()
                masked[np.arange(n) % 7 == 3] = np.nan
                m = pd.Series(masked)
                rows = [
                    ("np_sum", "", np.sum(a)),
                    ("mean", "", s.mean()),
                    ("np_mean", "", np.mean(a)),
                    ("var", "0", s.var(ddof=0)),
                    ("var", "1", s.var(ddof=1)),
                    ("np_var", "0", np.var(a)),
                    ("std", "1", s.std(ddof=1)),
                    ("median", "", s.median()),
                    ("np_median", "", np.median(a)),
                    ("m_mean", "", m.mean()),
                    ("m_var", "0", m.var(ddof=0)),
                    ("m_var", "1", m.var(ddof=1)),
                    ("m_std", "1", m.std(ddof=1)),
                    ("m_median", "", m.median()),
                ]
                for q in qs:
                    pq = s.quantile(q)
                    assert pq == np.quantile(a, q) or (np.isnan(pq) and np.isnan(np.quantile(a, q)))
                    rows.append(("quantile", f(q), pq))
                    rows.append(("m_quantile", f(q), m.quantile(q)))
                for stat, param, value in rows:
                    fh.write(f"{kind}\t{n}\t{stat}\t{param}\t{f(value)}\n")


if __name__ == "__main__":
    t_tables()
    numpy_table()
