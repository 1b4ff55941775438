#!/usr/bin/env python3
"""End to end on a local Spark: `python -m rollstat.spark` (the installed package) over a sweep cut into 4 files gives
the bytes of single-machine `rollstat aggregate` and `profile` on the files
concatenated, also when one task's first attempt fails; bad input is refused.

    python tests/python/check_spark.py ROLLSTAT_BINARY [ROLLOUTS_PER_SWEEP]
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
DRIVER = ["-m", "rollstat.spark"]

from check_ray import make_sweep, refuses_bad_input, run, same, same_profile  # noqa: E402  (the shared checks live beside this file)


def main():
    binary = os.path.abspath(sys.argv[1])
    rollouts = int(sys.argv[2]) if len(sys.argv) > 2 else 20000
    work = tempfile.mkdtemp(prefix="rollstat-check-spark-")
    generate = ["--tasks", str(rollouts // 4), "--repeats", "4", "--agents", "2", "--seed", "23", "--masked-frac",
                "0.02", "--missing-frac", "0.02", "--text-bytes", "100"]
    inputs, files, want_agg, want_prof = make_sweep(binary, work, generate, 4, seed=9)
    common = ["--master", "local[2,4]"]
    try:
        got = os.path.join(work, "got.json")
        run(sys.executable, *DRIVER, "aggregate", "--rollouts", *files, "--inputs", inputs, "--out", got, "--buckets", "5",
            *common)
        same(got, want_agg, "aggregate over 4 files on Spark")
        # The statistics run as rounds of Spark tasks; a summing share task's first
        # attempt fails: Spark retries it, the bytes are the same.
        env = dict(os.environ, ROLLSTAT_SPARK_FAIL_ONCE="share1:1")
        got_retry = os.path.join(work, "got-retry.json")
        run(sys.executable, *DRIVER, "aggregate", "--rollouts", "file://" + os.path.join(work, "part*.jsonl"),
            "--inputs", inputs, "--out", got_retry, "--buckets", "4", *common, env=env)
        same(got_retry, want_agg, "aggregate in rounds, a failed share task retried")
        got_prof = os.path.join(work, "got-prof")
        run(sys.executable, *DRIVER, "profile", "--rollouts", *files, "--name", "all.jsonl", "--inputs", inputs,
            "--allow-partial", "--out-dir", got_prof, "--buckets", "3", "--split-bytes", "2000000", *common)
        same_profile(got_prof, want_prof)
        refuses_bad_input(DRIVER, work, files[0], common)
    finally:
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
