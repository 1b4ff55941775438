#!/usr/bin/env python3
"""How long `rollstat select` takes against `aggregate --no-health-check` on the same files.

    python3 benches/selection.py ROLLSTAT_BIN [options]

In alternating pairs (aggregate first in odd pairs, select first in even ones, so that both
see the same load), on the bench sweep: `aggregate -q --no-health-check ROLLOUTS --inputs
INPUTS` (the same two files; `--aggregate-rollouts-only` leaves the inputs out) and
`select --rollouts ROLLOUTS --inputs INPUTS --band 0.2..0.8 --per subset --max 1000` (a band
with a quota; `--select-args` gives others), each writing into a fresh folder. Printed: the
wall and CPU time (user + system from wait4) and peak RSS of every run, the medians, the
ratio of the medians and the median of the pair ratios, and the 1-minute load before and
after. The page cache is warmed by reading the files once. Other work on the machine slows
both commands, not always equally within a pair, so measure on a quiet machine and quote
the load. Only standard-library Python.

Options:
  --pairs N           pairs (default 5)
  --sweep DIR         the sweep's folder (rollouts.jsonl, materialized_inputs.jsonl;
                      default /work/bench1m, the 1M bench sweep)
  --select-args ARGS  the selection's flags, one string (default the band with a quota)
  --aggregate-rollouts-only
                      run aggregate without --inputs
  --scratch DIR       where outputs go (default: a temporary folder beside the sweep)
"""

import argparse
import os
import shlex
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paired import run_fresh  # noqa: E402

DEFAULT_SELECT = "--band 0.2..0.8 --per subset --max 1000"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("binary")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--sweep", default="/work/bench1m")
    p.add_argument("--select-args", default=DEFAULT_SELECT)
    p.add_argument("--aggregate-rollouts-only", action="store_true")
    p.add_argument("--scratch")
    a = p.parse_args()
    rollouts = os.path.join(a.sweep, "rollouts.jsonl")
    inputs = os.path.join(a.sweep, "materialized_inputs.jsonl")
    for f in (rollouts, inputs):
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass
    scratch = tempfile.mkdtemp(prefix="select-bench-", dir=a.scratch or os.path.dirname(os.path.abspath(a.sweep)))

    def argv(which, out):
        if which == "aggregate":
            both = [] if a.aggregate_rollouts_only else ["--inputs", inputs]
            return [a.binary, "aggregate", "-q", "--no-health-check", rollouts, *both, "--out",
                    os.path.join(out, "agg.json")]
        return [a.binary, "select", "-q", "--rollouts", rollouts, "--inputs", inputs, *shlex.split(a.select_args),
                "--out", os.path.join(out, "next.jsonl")]

    agg = "rollouts only" if a.aggregate_rollouts_only else "rollouts and inputs"
    print(f"binary {a.binary}\nsweep {a.sweep}, {a.pairs} pairs; select {a.select_args}; aggregate {agg}")
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    runs = {"aggregate": [], "select": []}
    try:
        for i in range(a.pairs):
            order = ["aggregate", "select"] if i % 2 == 0 else ["select", "aggregate"]
            for which in order:
                runs[which].append(run_fresh(scratch, which, lambda out: argv(which, out))[0])
            print(f"pair {i + 1}: aggregate {runs['aggregate'][-1][0]:.2f} s, select {runs['select'][-1][0]:.2f} s; "
                  f"load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    med = {w: [statistics.median(r[k] for r in runs[w]) for k in range(3)] for w in runs}
    pair = [statistics.median(s[k] / g[k] for g, s in zip(runs["aggregate"], runs["select"])) for k in range(2)]
    print()
    print("| command | wall (s) | CPU (s) | peak RSS (MB) |")
    print("|---|---|---|---|")
    for w in runs:
        print(f"| `{w}` | {med[w][0]:.2f} | {med[w][1]:.2f} | {med[w][2] / 1024:.0f} |")
    print(f"\nselect / aggregate: wall {med['select'][0] / med['aggregate'][0]:.3f}, "
          f"CPU {med['select'][1] / med['aggregate'][1]:.3f} (medians); pair ratios {pair[0]:.3f}, {pair[1]:.3f}")
    for w in runs:
        print(f"{w}: wall " + " ".join(f"{x[0]:.2f}" for x in runs[w]) + "; CPU "
              + " ".join(f"{x[1]:.2f}" for x in runs[w]))


if __name__ == "__main__":
    main()
