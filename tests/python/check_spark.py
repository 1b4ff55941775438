#!/usr/bin/env python3
"""End to end on a local Spark: dist/rollstat_spark.py over a sweep cut into 4 files gives
the bytes of single-machine `rollstat aggregate` and `profile` on the files
concatenated, also when one task's first attempt fails; bad input is refused.

    python tests/python/check_spark.py ROLLSTAT_BINARY [ROLLOUTS_PER_SWEEP]
"""

import os
import random
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DRIVER = os.path.join(HERE, "..", "..", "dist", "rollstat_spark.py")


def run(*args, env=None):
    p = subprocess.run(list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"FAILED ({p.returncode}): {' '.join(args)}\n{p.stderr}")
    return p


def same(a, b, what):
    with open(a, "rb") as x, open(b, "rb") as y:
        if x.read() != y.read():
            sys.exit(f"FAILED: {what}: {a} and {b} differ")
    print(f"ok: {what}: identical bytes")


def main():
    binary = os.path.abspath(sys.argv[1])
    rollouts = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    work = tempfile.mkdtemp(prefix="rollstat-check-spark-")
    gen = os.path.join(work, "gen")
    run(binary, "generate", "--tasks", str(rollouts // 4), "--repeats", "4", "--agents", "2", "--seed", "23",
        "--masked-frac", "0.02", "--missing-frac", "0.02", "--text-bytes", "100", "--out-dir", gen, "-q")
    inputs = os.path.join(gen, "materialized_inputs.jsonl")
    with open(os.path.join(gen, "rollouts.jsonl")) as f:
        lines = f.readlines()
    rng = random.Random(9)
    rng.shuffle(lines)
    cuts = sorted(rng.sample(range(1, len(lines)), 3))
    files = []
    for k, (a, b) in enumerate(zip([0] + cuts, cuts + [len(lines)])):
        files.append(os.path.join(work, f"part{k}.jsonl"))
        with open(files[-1], "w") as f:
            f.writelines(lines[a:b])
    everything = os.path.join(work, "all.jsonl")
    with open(everything, "w") as f:
        f.writelines(lines)
    del lines
    want_agg = os.path.join(work, "want.json")
    run(binary, "aggregate", everything, "--inputs", inputs, "--out", want_agg, "-q")
    want_prof = os.path.join(work, "want-prof")
    run(binary, "profile", "--rollouts", everything, "--inputs", inputs, "--out-dir", want_prof, "--allow-partial", "-q")
    common = ["--rollstat", binary, "--master", "local[2,4]"]
    try:
        got = os.path.join(work, "got.json")
        run(sys.executable, DRIVER, "aggregate", "--rollouts", *files, "--inputs", inputs, "--out", got, "--buckets", "5",
            *common)
        same(got, want_agg, "aggregate over 4 files on Spark")
        # One partial task's first attempt fails: Spark retries it, the bytes are the same.
        env = dict(os.environ, ROLLSTAT_SPARK_FAIL_ONCE="partial:1")
        got_retry = os.path.join(work, "got-retry.json")
        run(sys.executable, DRIVER, "aggregate", "--rollouts", "file://" + os.path.join(work, "part*.jsonl"),
            "--inputs", inputs, "--out", got_retry, "--buckets", "4", "--low-memory", *common, env=env)
        same(got_retry, want_agg, "aggregate with a failed task retried, merged with --low-memory")
        got_prof = os.path.join(work, "got-prof")
        run(sys.executable, DRIVER, "profile", "--rollouts", *files, "--name", "all.jsonl", "--inputs", inputs,
            "--allow-partial", "--out-dir", got_prof, "--buckets", "3", "--split-bytes", "2000000", *common)
        for f in ["all_reward_profiling.jsonl", "all_agent_metrics.json", "all_repeat_level_metrics.json"]:
            same(os.path.join(got_prof, f), os.path.join(want_prof, f), f"profile {f}")
        bad = os.path.join(work, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1}\n{"_ng_task_index": 1, "reward": }\n')
        got_bad = os.path.join(work, "bad.json")
        p = subprocess.run([sys.executable, DRIVER, "aggregate", "--rollouts", files[0], bad, "--out", got_bad, *common],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if p.returncode != 2 or "bad.jsonl, line 2" not in p.stderr or os.path.exists(got_bad):
            sys.exit(f"FAILED: bad input gave exit {p.returncode}, stderr {p.stderr!r}")
        print("ok: bad input refused (exit 2, file and line named, no output)")
    finally:
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
