"""Run `rollstat aggregate` or `rollstat profile` over a sweep split into many files, on
Spark: the same three stages as `rollstat.ray` (`rollstat shard` per file or
byte range, of the rollouts and of the materialized inputs; `rollstat join` per
bucket of tasks; one `rollstat merge`), each a Spark job whose tasks call the rollstat
binary. The output is byte-identical to the single-machine command on the files
concatenated: Spark only moves file names and schedules; rollstat computes every number.

    python -m rollstat.spark aggregate --rollouts 'runs/*.jsonl' --out agg.json
    python -m rollstat.spark profile --rollouts a.jsonl b.jsonl --inputs in.jsonl --out-dir prof/

or from Python, `rollstat.spark.aggregate(...)` and `rollstat.spark.profile(...)`.

Every task runs the `rollstat` command of the package installed on its executor (the
one beside the executor's Python, else on PATH; --rollstat PATH names another) on files
in a work folder every executor can read (--work-dir). Flags this driver does not know
go to `rollstat merge`. It shares its helpers with `rollstat.ray`.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

from .ray import (
    BAD_INPUT,
    BadInput,
    Stages,
    bucket_width,
    expand_inputs,
    merge_destination,
    _flags,
    _run,
    run_rollstat,
    stage_line,
)


def task(job):
    """One Spark task: (command, failure marker, measure). A refusal (exit status 2)
    comes back as a value, so Spark does not retry it; any other failure raises, and
    Spark retries the task."""
    cmd, marker, measure = job
    try:
        return ("ok", run_rollstat(cmd, marker, measure))
    except BadInput as e:
        return ("bad", str(e))


def run_stage(sc, jobs):
    """Runs the jobs as one Spark job, a task each; their reports, or BadInput."""
    if not jobs:
        return []
    results = sc.parallelize(jobs, len(jobs)).map(task).collect()
    for kind, value in results:
        if kind == "bad":
            raise BadInput(value)
    return [value for _, value in results]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["aggregate", "profile"])
    ap.add_argument("--rollouts", nargs="+", required=True, help="rollouts files, globs or file:// URIs, in order")
    ap.add_argument("--inputs", default=None, help="materialized inputs file; sharded by bucket like the rollouts")
    ap.add_argument("--out", help="aggregate: output file")
    ap.add_argument("--out-dir", help="profile: folder for the three artifacts")
    ap.add_argument("--name", default=None, help="the sweep's file name (profile names its artifacts after it)")
    ap.add_argument("--buckets", type=int, default=None, help="buckets of tasks (default: 4 per core of the master)")
    ap.add_argument("--task-width", type=int, default=None, help="tasks per bucket (default: from --buckets)")
    ap.add_argument("--master", default=None, help="Spark master (default: local, every core)")
    ap.add_argument("--rollstat", default=None,
                    help="a rollstat binary every executor can run (default: the package's own command on each executor)")
    ap.add_argument("--work-dir", default=None, help="folder every executor can read and write (default: a temp folder)")
    ap.add_argument("--max-retries", type=int, default=3, help="retries of a failed task")
    ap.add_argument("--split-bytes", type=int, default=1 << 30,
                    help="shard a file larger than this in byte ranges, one task each (default 1 GiB; 0: never)")
    ap.add_argument("--stats", action="store_true", help="print each stage's tasks, wall time and peak task memory")
    a, passthrough = ap.parse_known_args(argv)
    if a.command == "aggregate" and not a.out:
        ap.error("aggregate needs --out FILE")
    if a.command == "profile" and not a.out_dir:
        ap.error("profile needs --out-dir DIR")
    for spec in [*a.rollouts, a.inputs or ""]:
        if "://" in spec and not spec.startswith("file://"):
            ap.error(f"{spec}: this driver reads local paths and file:// URIs (copy other storage in first)")

    begun = time.monotonic()
    from pyspark import SparkConf, SparkContext

    # Without --rollstat each task finds the package's command on its own executor.
    rollstat = os.path.abspath(a.rollstat) if a.rollstat else "rollstat"
    files = expand_inputs(a.rollouts)
    inputs = expand_inputs([a.inputs])[0] if a.inputs else None
    cores = os.cpu_count() or 1
    # The executors' Python must have the package (its helpers and its command): by
    # default this driver's own, as a local Spark or a cluster of like nodes has it.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # local[N,F]: N threads, a task tried up to F times (plain local[N] never retries).
    master = a.master or f"local[{cores},{a.max_retries + 1}]"
    conf = (SparkConf().setMaster(master).setAppName("rollstat")
            .set("spark.task.maxFailures", str(a.max_retries + 1))
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false"))
    sc = SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    work = a.work_dir or tempfile.mkdtemp(prefix="rollstat-spark-", dir=os.environ.get("ROLLSTAT_SPARK_TMP"))
    os.makedirs(work, exist_ok=True)
    # ROLLSTAT_SPARK_FAIL_ONCE=join:K (or shard:K, merge:0): that task's first attempt fails.
    fail = os.environ.get("ROLLSTAT_SPARK_FAIL_ONCE", "")

    try:
        width = bucket_width(files, a.task_width, a.buckets or 4 * int(sc.defaultParallelism))
        stages = Stages(rollstat, work, files, inputs, width, a.split_bytes, fail)
        stats = []
        started = time.monotonic()
        stats.append(stage_line("shard", started, run_stage(sc, [(c, m, a.stats) for c, m in stages.shards()])))
        started = time.monotonic()
        stats.append(stage_line("join", started, run_stage(sc, [(c, m, a.stats) for c, m in stages.joins()])))
        name = a.name or (os.path.basename(files[0]) if len(files) == 1 else "rollouts.jsonl")
        merge_flags = passthrough
        if stages.wants_rounds(passthrough):
            stage = lambda jobs: run_stage(sc, [(c, m, a.stats) for c, m in jobs])  # noqa: E731
            merge_flags = passthrough + stages.statistics_rounds(a.command, passthrough, stage, stats)
        cmd, m = stages.merge(a.command, name, merge_destination(a), merge_flags)
        started = time.monotonic()
        report = run_stage(sc, [(cmd, m, a.stats)])[0]
        stats.append(stage_line("merge", started, [report]))
        sys.stderr.write(report[0])
        if a.stats:
            stats.append(f"rollstat_spark: total {time.monotonic() - begun:.2f} s\n")
            sys.stderr.write("".join(s.replace("rollstat_ray:", "rollstat_spark:") for s in stats))
    except BadInput as e:
        sys.stderr.write(f"{e}\n")
        return BAD_INPUT
    except Exception as e:  # a task that failed every retry, or Spark itself
        text = str(e)
        # Spark wraps a task's Python exception in its own: name the task's failure.
        cause = next((ln.strip() for ln in text.splitlines() if "TaskFailed:" in ln), None)
        sys.stderr.write(f"rollstat_spark: {cause or (text.splitlines() or [type(e).__name__])[0]}\n")
        return 1
    finally:
        sc.stop()
        if not a.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def aggregate(rollouts, *, out, inputs=None, **options):
    """`rollstat aggregate` over a sweep in many files, on Spark: the bytes of the
    single-machine command. `options` are the command-line flags by name (`master=`,
    `buckets=`, `whole_table=True`, …)."""
    _run(main, _flags("aggregate", rollouts, dict(out=out, inputs=inputs, **options)))


def profile(rollouts, *, out_dir, inputs, **options):
    """`rollstat profile` over a sweep in many files, on Spark (see `aggregate`)."""
    _run(main, _flags("profile", rollouts, dict(out_dir=out_dir, inputs=inputs, **options)))


if __name__ == "__main__":
    sys.exit(main())
