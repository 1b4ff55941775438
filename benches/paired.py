#!/usr/bin/env python3
"""This tree against an earlier commit, in alternating pairs, on the bench sweep.

    python3 benches/paired.py BASE [options]

BASE is a commit (hash, tag or branch). It is checked out in its own git worktree beside
this one and built there into its own target folder; both are kept, so a second run
builds nothing (give --seed-target DIR to start that target folder as a copy of a built
one, so that only what differs compiles). This tree is built with `cargo build --release
--locked` into CARGO_TARGET_DIR (else target/). Then, for each command, PAIRS pairs of
runs, the base first in odd pairs and this tree first in even ones, so that both see the
same load: `aggregate` (with the health check where the binary has it), `aggregate
--no-health-check` (the flag left out for a binary without it), `profile
--allow-partial` and `export`, each writing into a fresh folder. Printed per command: the
median wall time and CPU time (user + system of the process and its threads, from
wait4) of each binary, their ratios, and whether every output file both binaries write
is byte-identical (files only one of them writes are named).

The sweep (default target/bench-sweep-200000, the `cargo bench` sweep: 200,000 tasks x
5 repeats, 1% missing, 1% masked, seed 4242, 2.66 GB) is generated with this tree's
binary when missing. The page cache is warmed by reading it once. The 1-minute load is
printed before and after: other work on the machine slows both binaries, but not
equally within a pair when it comes and goes, so measure on a quiet machine.

Options:
  --pairs N           pairs per command (default 5)
  --commands A,B      of aggregate, aggregate-no-check, profile, export (default all)
  --sweep DIR         the sweep's folder (rollouts.jsonl, materialized_inputs.jsonl)
  --worktree DIR      the base's worktree (default: ../rollstat-base-SHORT beside this one)
  --target-dir DIR    the base's target folder (default: that worktree's path + "-target")
  --seed-target DIR   copy DIR into a missing base target folder first
  --base-bin FILE     use this binary as the base instead of building BASE
  --new-bin FILE      use this binary for this tree instead of building it
  --scratch DIR       where outputs go (default: a temporary folder beside the sweep)
"""

import argparse
import functools
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
COMMANDS = ["aggregate", "aggregate-no-check", "profile", "export"]


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, **kw)


def git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def build(src, target):
    env = dict(os.environ, CARGO_TARGET_DIR=target)
    print(f"building {src} into {target}", file=sys.stderr)
    sh(["cargo", "build", "--release", "--locked", "--bin", "rollstat"], cwd=src, env=env)
    return os.path.join(target, "release", "rollstat")


def base_binary(a):
    if a.base_bin:
        return a.base_bin
    sha = git("rev-parse", "--verify", a.base + "^{commit}")
    tree = a.worktree or os.path.join(os.path.dirname(ROOT), f"rollstat-base-{sha[:7]}")
    target = a.target_dir or tree + "-target"
    if not os.path.isdir(tree):
        git("worktree", "add", "--detach", tree, sha)
    elif git("rev-parse", "HEAD", cwd=tree) != sha:
        git("checkout", "--detach", sha, cwd=tree)
    if not os.path.isdir(target) and a.seed_target:
        print(f"seeding {target} from {a.seed_target}", file=sys.stderr)
        sh(["cp", "-a", a.seed_target, target])
    return build(tree, target)


def new_binary(a):
    if a.new_bin:
        return a.new_bin
    return build(ROOT, os.environ.get("CARGO_TARGET_DIR") or os.path.join(ROOT, "target"))


def sweep_files(a, binary):
    rollouts = os.path.join(a.sweep, "rollouts.jsonl")
    inputs = os.path.join(a.sweep, "materialized_inputs.jsonl")
    if not os.path.isfile(rollouts):
        print(f"generating the bench sweep into {a.sweep}", file=sys.stderr)
        sh([binary, "generate", "-q", "--tasks", "200000", "--repeats", "5", "--agents", "1", "--seed", "4242",
            "--missing-frac", "0.01", "--masked-frac", "0.01", "--out-dir", a.sweep])
    for f in (rollouts, inputs):
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass
    return rollouts, inputs


@functools.lru_cache(maxsize=None)
def has_flag(binary, command, flag):
    out = subprocess.run([binary, command, "--help"], capture_output=True, text=True).stdout
    return flag in out


def argv(binary, command, rollouts, inputs, out):
    if command == "aggregate":
        return [binary, "aggregate", "-q", rollouts, "--out", os.path.join(out, "agg.json")]
    if command == "aggregate-no-check":
        args = [binary, "aggregate", "-q", rollouts, "--out", os.path.join(out, "agg.json")]
        return args + (["--no-health-check"] if has_flag(binary, "aggregate", "--no-health-check") else [])
    if command == "profile":
        return [binary, "profile", "-q", "--inputs", inputs, rollouts, "--allow-partial", "--out-dir", out]
    if command == "export":
        return [binary, "export", "-q", rollouts, "--inputs", inputs, "--out-dir", out]
    raise SystemExit(f"unknown command {command}")


def timed(cmd):
    """Wall seconds, CPU seconds (user + system) and peak RSS (KB) of one run."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{err.decode(errors='replace')}")
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def run_fresh(scratch, who, argv_of):
    """Runs argv_of(OUT) in a fresh folder OUT = scratch/who: its timing (see timed) and
    the digests of the files it wrote; the folder is removed after."""
    out = os.path.join(scratch, who)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    t = timed(argv_of(out))
    d = digests(out)
    shutil.rmtree(out)
    return t, d


def digests(folder):
    out = {}
    for dirpath, _, files in os.walk(folder):
        for f in files:
            path = os.path.join(dirpath, f)
            h = hashlib.sha256()
            with open(path, "rb") as fh:
                while chunk := fh.read(1 << 22):
                    h.update(chunk)
            out[os.path.relpath(path, folder)] = h.hexdigest()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("base")
    p.add_argument("--pairs", type=int, default=5)
    p.add_argument("--commands", default=",".join(COMMANDS))
    p.add_argument("--sweep", default=os.path.join(ROOT, "target", "bench-sweep-200000"))
    p.add_argument("--worktree")
    p.add_argument("--target-dir")
    p.add_argument("--seed-target")
    p.add_argument("--base-bin")
    p.add_argument("--new-bin")
    p.add_argument("--scratch")
    a = p.parse_args()
    commands = a.commands.split(",")
    for c in commands:
        if c not in COMMANDS:
            raise SystemExit(f"unknown command {c} (give some of {', '.join(COMMANDS)})")
    new = new_binary(a)
    base = base_binary(a)
    rollouts, inputs = sweep_files(a, new)
    scratch = tempfile.mkdtemp(prefix="paired-", dir=a.scratch or os.path.dirname(os.path.abspath(a.sweep)))
    bins = {"base": base, "new": new}
    print(f"base {base}\nnew  {new}\nsweep {a.sweep}, {a.pairs} pairs per command")
    print(f"load before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    rows = []
    try:
        for c in commands:
            runs = {"base": [], "new": []}
            seen = {"base": None, "new": None}
            for i in range(a.pairs):
                order = ["base", "new"] if i % 2 == 0 else ["new", "base"]
                for who in order:
                    t, d = run_fresh(scratch, who, lambda out: argv(bins[who], c, rollouts, inputs, out))
                    runs[who].append(t)
                    if seen[who] is not None and seen[who] != d:
                        print(f"warning: {c}: {who} wrote different bytes in two runs", file=sys.stderr)
                    seen[who] = d
            both = sorted(set(seen["base"]) & set(seen["new"]))
            rows.append({
                "command": c,
                "runs": runs,
                "median": {w: [statistics.median(r[k] for r in runs[w]) for k in range(3)] for w in runs},
                "pair": [statistics.median(n[k] / b[k] for b, n in zip(runs["base"], runs["new"])) for k in range(2)],
                "compared": len(both),
                "differ": [f for f in both if seen["base"][f] != seen["new"][f]],
                "only": sorted(set(seen["base"]) ^ set(seen["new"])),
            })
            print(f"{c}: done; load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print()
    print("| command | base wall, CPU (s) | new wall, CPU (s) | wall ratio | CPU ratio | pair ratios (wall, CPU) | "
          "peak RSS base, new (MB) | outputs |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        b, n = r["median"]["base"], r["median"]["new"]
        verdict = f"identical ({r['compared']} files)" if not r["differ"] else "DIFFER: " + ", ".join(r["differ"])
        if r["only"]:
            verdict += "; written by one only: " + ", ".join(r["only"])
        print(f"| `{r['command']}` | {b[0]:.2f}, {b[1]:.2f} | {n[0]:.2f}, {n[1]:.2f} | {n[0] / b[0]:.3f} | "
              f"{n[1] / b[1]:.3f} | {r['pair'][0]:.3f}, {r['pair'][1]:.3f} | {b[2] / 1024:.0f}, {n[2] / 1024:.0f} | "
              f"{verdict} |")
    print()
    for r in rows:
        for w in ("base", "new"):
            print(f"{r['command']} {w}: wall " + " ".join(f"{x[0]:.2f}" for x in r["runs"][w]) + "; CPU "
                  + " ".join(f"{x[1]:.2f}" for x in r["runs"][w]))
    if any(r["differ"] for r in rows):
        sys.exit(1)

if __name__ == "__main__":
    main()
