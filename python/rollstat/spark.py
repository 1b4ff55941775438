"""Run `rollstat aggregate` or `rollstat profile` over a sweep split into many files, on
Spark: the same stages as `rollstat.ray` (a shard task per file or byte range, of the
rollouts and of the materialized inputs; a join task per bucket of tasks; the
statistics in rounds of share and combine tasks; one merge), each a Spark job whose
tasks call the rollstat package on their executor. The output is byte-identical to the
single-machine command on the files concatenated: Spark only moves file names and
schedules; rollstat computes every number.

    python -m rollstat.spark aggregate --rollouts 'runs/*.jsonl' --out agg.json
    python -m rollstat.spark profile --rollouts a.jsonl b.jsonl --inputs in.jsonl --out-dir prof/

or from Python, `rollstat.spark.aggregate(...)` and `rollstat.spark.profile(...)`, whose
keyword arguments the flags are.

Every task calls the rollstat package installed on its executor (the engine's shard,
join and merge, in the executor's Python) on files in a work folder every executor can
read (--work-dir). It shares its stages with `rollstat.ray`.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from typing import Any, Iterable, List, Optional, Sequence, Tuple

from . import _sweep as _s
from ._args import PathLike, Paths
from ._errors import InputError, RollstatError
from ._sweep import BAD_INPUT, BadInput  # noqa: F401  (the names tasks raise)


def task(job: Tuple[Any, Optional[str], bool]) -> Tuple[str, Any]:
    """One Spark task: (task, failure marker, measure). A refusal comes back as a value,
    so Spark does not retry it; any other failure raises, and Spark retries the task."""
    t, marker, measure = job
    try:
        return ("ok", _s.run_task(t, marker, measure))
    except BadInput as e:
        return ("bad", e.args)


def run_stage(sc: Any, jobs: List[Tuple[Any, Optional[str]]], measure: bool) -> List[_s.Report]:
    """Runs the tasks as one Spark job, a Spark task each; their reports, or BadInput."""
    if not jobs:
        return []
    results = sc.parallelize([(t, m, measure) for t, m in jobs], len(jobs)).map(task).collect()
    for kind, value in results:
        if kind == "bad":
            raise BadInput(*value)
    return [value for _, value in results]


def _drive(s: _s.Sweep, options: _s.Options, master: Optional[str]) -> None:
    """Runs the sweep on Spark; raises `InputError` when it is refused, `RollstatError`
    when a task fails every retry."""
    for spec in [*s.rollouts, s.inputs or ""]:
        if "://" in spec and not spec.startswith("file://"):
            raise InputError(f"{spec}: this driver reads local paths and file:// URIs (copy other storage in first)",
                             spec, None, None)
    begun = time.monotonic()
    from pyspark import SparkConf, SparkContext

    files = _s.expand_inputs(s.rollouts)
    inputs = _s.expand_inputs([s.inputs], "inputs")[0] if s.inputs else None
    cores = os.cpu_count() or 1
    # The executors' Python must have the package: by default this driver's own, as a
    # local Spark or a cluster of like nodes has it.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    # local[N,F]: N threads, a task tried up to F times (plain local[N] never retries).
    master = master or f"local[{cores},{s.max_retries + 1}]"
    conf = (SparkConf().setMaster(master).setAppName("rollstat")
            .set("spark.task.maxFailures", str(s.max_retries + 1))
            .set("spark.ui.enabled", "false")
            .set("spark.ui.showConsoleProgress", "false"))
    sc = SparkContext.getOrCreate(conf)
    sc.setLogLevel("ERROR")
    work = s.work_dir or tempfile.mkdtemp(prefix="rollstat-spark-", dir=os.environ.get("ROLLSTAT_SPARK_TMP"))
    os.makedirs(work, exist_ok=True)
    # ROLLSTAT_SPARK_FAIL_ONCE=join:K (or shard:K, shareR:K, combineR:0, merge:0): that
    # task's first attempt fails.
    fail = os.environ.get("ROLLSTAT_SPARK_FAIL_ONCE", "")
    try:
        width = _s.bucket_width(files, s.task_width, s.buckets or 4 * int(sc.defaultParallelism))
        stages = _s.Stages(work, files, inputs, width, s.split_bytes, fail)
        stats: List[str] = []
        warns = _s.run_stages(s, options, stages, _s.name_of(s.name, files),
                              lambda jobs: run_stage(sc, jobs, s.stats), "rollstat_spark", stats)
        _s.issue(warns)
        if s.stats:
            stats.append(f"rollstat_spark: total {time.monotonic() - begun:.2f} s\n")
            sys.stderr.write("".join(stats))
    except BadInput as e:
        raise e.error() from None
    except Exception as e:  # a task that failed every retry, or Spark itself
        text = str(e)
        # Spark wraps a task's Python exception in its own: name the task's failure.
        cause = next((ln.strip() for ln in text.splitlines() if "TaskFailed:" in ln), None)
        raise RollstatError(cause or (text.splitlines() or [type(e).__name__])[0]) from None
    finally:
        sc.stop()
        if not s.work_dir:
            shutil.rmtree(work, ignore_errors=True)


def aggregate(rollouts: Paths, *, out: PathLike, inputs: Optional[PathLike] = None, agent: Optional[str] = None,
              metrics: Iterable[str] = (), metric_dir: Optional[PathLike] = None, answer_key: Optional[str] = None,
              subset_key: Optional[str] = None, ddof: int = 0, key_metrics: Optional[Sequence[str]] = None,
              whole_table: bool = False, name: Optional[str] = None, buckets: Optional[int] = None,
              task_width: Optional[int] = None, master: Optional[str] = None, work_dir: Optional[PathLike] = None,
              max_retries: int = 3, split_bytes: int = 1 << 30, stats: bool = False) -> None:
    """`rollstat aggregate` over a sweep in many files, on Spark: the bytes of the
    single-machine command, written to `out`. The arguments are those of
    :func:`rollstat.ray.aggregate`, with `master` (the Spark master; default a local
    Spark on every core) instead of `address`."""
    _drive(*_s.checked("aggregate", locals(), "master"))


def profile(rollouts: Paths, *, out_dir: PathLike, inputs: PathLike, allow_partial: bool = False,
            metrics: Iterable[str] = (), metric_dir: Optional[PathLike] = None, answer_key: Optional[str] = None,
            subset_key: Optional[str] = None, ddof: int = 0, whole_table: bool = False, name: Optional[str] = None,
            buckets: Optional[int] = None, task_width: Optional[int] = None, master: Optional[str] = None,
            work_dir: Optional[PathLike] = None, max_retries: int = 3, split_bytes: int = 1 << 30,
            stats: bool = False) -> None:
    """`rollstat profile` over a sweep in many files, on Spark (see :func:`aggregate`)."""
    _drive(*_s.checked("profile", locals(), "master"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line: parsed into a call of :func:`aggregate` or :func:`profile`."""
    return _s.main(_s.Driver(__doc__ or "", "master", "Spark master (default: local, every core)", "executor",
                             "rollstat_spark", aggregate, profile), argv)


if __name__ == "__main__":
    sys.exit(main())
