#!/usr/bin/env python3
"""Side-by-side benchmark of the Python package on the 1M-rollout bench sweep.

    python benches/python_api.py ROLLSTAT_BINARY [SWEEP_DIR]

Run it with a Python that has the rollstat wheel, numpy and polars installed. The sweep is
the one `cargo bench --bench ingest` uses (200,000 tasks x 5 repeats, seed 4242); it is
generated into SWEEP_DIR (default target/bench-sweep-200000) when missing. Each
measurement runs in its own process, alternating, ROUNDS times (env ROLLSTAT_BENCH_ROUNDS,
default 5); the medians are printed:

1. `rollstat aggregate` (the binary) against `rollstat.aggregate()` (the API, in a fresh
   Python process; the call alone and the process with its import), wall time and peak RSS.
2. The 1M-rollout tasks table into Polars through the Arrow PyCapsule: the time of
   `polars.DataFrame(t.tasks)` and the resident memory it adds, against the table's size.
3. `rollstat.batch_metrics()` on a 1M-sample batch held as numpy arrays (int64 group ids,
   float32 token scores 1M x 16) against the VAGEN seed's `reward_variance` function (its
   numpy path) on the same arrays.
"""

import json
import os
import statistics
import subprocess
import sys
import time

ROUNDS = int(os.environ.get("ROLLSTAT_BENCH_ROUNDS", "5"))


def child(code, *args):
    """Runs `code` in a fresh Python; returns the JSON line it prints last and the
    process's wall time."""
    start = time.monotonic()
    p = subprocess.Popen([sys.executable, "-c", code, *map(str, args)], stdout=subprocess.PIPE, text=True)
    out, _ = p.communicate()
    wall = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"benchmark child failed: {code[:80]}")
    return json.loads(out.strip().splitlines()[-1]), wall


def timed_cmd(args):
    start = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *map(str, args)], stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(map(str, args))}\n{p.stderr}")
    return wall, int(p.stderr.strip().splitlines()[-1]) / 1024


API_AGGREGATE = r"""
import json, resource, sys, time
t0 = time.monotonic()
import rollstat
t1 = time.monotonic()
r = rollstat.aggregate(sys.argv[1], out=sys.argv[2])
t2 = time.monotonic()
print(json.dumps({"import": t1 - t0, "call": t2 - t1,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

TASKS_TO_POLARS = r"""
import json, resource, sys, time
import polars as pl
import rollstat

def rss():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024

t = rollstat.tables(sys.argv[1])
tasks = t.tasks
before = rss()
t0 = time.monotonic()
df = pl.DataFrame(tasks)
took = time.monotonic() - t0
after = rss()
print(json.dumps({"seconds": took, "added_mb": after - before, "table_mb": df.estimated_size() / 2**20,
                  "rows": df.height, "columns": df.width}))
"""

BATCH = r"""
import json, sys, time, warnings
import numpy as np
import rollstat
from collections import defaultdict

def reward_variance(token_level_scores, group_idx, ddof=0):
    # The VAGEN seed's function, its numpy path, on the same arrays.
    total_rewards = np.asarray(token_level_scores).sum(axis=-1)
    group_rewards = defaultdict(list)
    for idx, reward in zip(group_idx, total_rewards):
        group_rewards[str(idx)].append(float(reward))
    per_group_vars = []
    for rewards in group_rewards.values():
        if len(rewards) <= 1:
            per_group_vars.append(0.0)
        else:
            per_group_vars.append(float(np.var(rewards, ddof=ddof)))
    return float(np.mean(per_group_vars)) if per_group_vars else 0.0

rng = np.random.default_rng(7)
n = 1_000_000
groups = rng.integers(0, n // 8, size=n).astype(np.int64)
scores = (rng.random((n, 16)) < 0.05).astype(np.float32)
which = sys.argv[1]
t0 = time.monotonic()
if which == "seed":
    v = reward_variance(scores, groups)
else:
    v = rollstat.batch_metrics({"group_idx": groups, "token_level_scores": scores},
                               metrics=["reward_variance"])["custom_metrics/train/reward_variance"]
print(json.dumps({"seconds": time.monotonic() - t0, "value": v}))
"""


def main():
    binary = os.path.abspath(sys.argv[1])
    here = os.path.dirname(os.path.abspath(__file__))
    sweep = sys.argv[2] if len(sys.argv) > 2 else os.path.join(here, "..", "target", "bench-sweep-200000")
    rollouts = os.path.join(sweep, "rollouts.jsonl")
    if not os.path.exists(rollouts):
        subprocess.run([binary, "generate", "-q", "--tasks", "200000", "--repeats", "5", "--agents", "1", "--seed",
                        "4242", "--missing-frac", "0.01", "--masked-frac", "0.01", "--out-dir", sweep], check=True)
    out = os.path.join(sweep, "py-bench-out")
    os.makedirs(out, exist_ok=True)
    subprocess.run(["cat", rollouts], stdout=subprocess.DEVNULL, check=True)  # warm the page cache

    cli, api_wall, api_call, api_peak, cli_peak = [], [], [], [], []
    for _ in range(ROUNDS):
        for f in os.listdir(out):
            os.unlink(os.path.join(out, f))
        subprocess.run(["sync"], check=True)
        w, peak = timed_cmd([binary, "aggregate", "-q", "--rollouts", rollouts, "--out", os.path.join(out, "cli.json")])
        cli.append(w)
        cli_peak.append(peak)
        os.unlink(os.path.join(out, "cli.json"))
        subprocess.run(["sync"], check=True)
        r, w = child(API_AGGREGATE, rollouts, os.path.join(out, "api.json"))
        api_wall.append(w)
        api_call.append(r["call"])
        api_peak.append(r["peak_mb"])
    med = statistics.median
    print(f"aggregate, 1M rollouts, {ROUNDS} rounds (medians):")
    print(f"  rollstat aggregate (binary)        {med(cli):6.2f} s   peak {med(cli_peak):6.0f} MB")
    print(f"  rollstat.aggregate() call          {med(api_call):6.2f} s   ({med(api_call) / med(cli):.3f}x the binary)")
    print(f"  python -c 'import rollstat; …'     {med(api_wall):6.2f} s   peak {med(api_peak):6.0f} MB")

    runs = [child(TASKS_TO_POLARS, rollouts)[0] for _ in range(ROUNDS)]
    print(f"tasks table into Polars ({runs[0]['rows']} rows x {runs[0]['columns']} columns, "
          f"{runs[0]['table_mb']:.1f} MB of columns):")
    print(f"  polars.DataFrame(t.tasks)          {med(r['seconds'] for r in runs) * 1000:6.2f} ms   "
          f"resident memory added {med(r['added_mb'] for r in runs):.1f} MB")

    seed, ours = [], []
    for _ in range(ROUNDS):
        s = child(BATCH, "seed")[0]
        o = child(BATCH, "rollstat")[0]
        assert abs(s["value"] - o["value"]) <= 1e-12 * abs(s["value"]), (s, o)
        seed.append(s["seconds"])
        ours.append(o["seconds"])
    print("reward_variance, 1M samples x 16 float32 token scores, 125k groups (numpy arrays):")
    print(f"  VAGEN seed function (numpy)        {med(seed):6.2f} s")
    print(f"  rollstat.batch_metrics()           {med(ours):6.2f} s   ({med(seed) / med(ours):.1f}x faster)")


if __name__ == "__main__":
    main()
