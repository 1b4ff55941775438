"""Run `rollstat aggregate` or `rollstat profile` over a sweep split into many files,
on a Ray cluster: one shard task per file (and per file of materialized inputs), one
join task per bucket of tasks, the statistics in rounds of share and combine tasks, one
merge task. The output is byte-identical to the single-machine command on the files
concatenated.

    python -m rollstat.ray aggregate --rollouts 'runs/*.jsonl' --out agg.json
    python -m rollstat.ray profile --rollouts a.jsonl b.jsonl --inputs in.jsonl --out-dir prof/

or from Python, `rollstat.ray.aggregate(...)` and `rollstat.ray.profile(...)`, whose
keyword arguments the flags are.

Every task calls the rollstat package installed on its node (the engine's shard, join
and merge, in the Ray worker's Python), on files in a work folder every node can read
(--work-dir). Install the package on every node, or give Ray
`runtime_env={"pip": ["rollstat"]}` (or the wheel's path). See docs/distributed.md.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from typing import Any, Iterable, List, Optional, Sequence

from . import _sweep as _s
from ._args import PathLike, Paths
from ._errors import RollstatError
from ._sweep import BAD_INPUT, BadInput, TaskFailed  # noqa: F401  (the names tasks raise)


def fetch(uri: str, dest_dir: str) -> str:
    """Copies a file from any filesystem pyarrow knows to `dest_dir`; returns the copy."""
    import pyarrow.fs as pafs

    fs, path = pafs.FileSystem.from_uri(uri)
    dest = os.path.join(dest_dir, os.path.basename(path))
    with fs.open_input_stream(path) as src, open(dest, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return dest


def _drive(s: _s.Sweep, options: _s.Options, address: Optional[str]) -> None:
    """Runs the sweep on Ray; raises `InputError` when it is refused, `RollstatError`
    when a task fails every retry."""
    begun = time.monotonic()
    import ray

    files = _s.expand_inputs(s.rollouts)
    # A caller already connected to Ray (a notebook, a job) keeps its connection; one
    # this call makes is closed at the end.
    owned = not ray.is_initialized()
    if owned:
        ray.init(address=address, log_to_driver=False, include_dashboard=False)
    work = s.work_dir or tempfile.mkdtemp(prefix="rollstat-ray-", dir=os.environ.get("ROLLSTAT_RAY_TMP"))
    os.makedirs(work, exist_ok=True)
    # ROLLSTAT_RAY_FAIL_ONCE=join:K (or shard:K, shareR:K, combineR:0, merge:0): that
    # task's first attempt fails.
    fail = os.environ.get("ROLLSTAT_RAY_FAIL_ONCE", "")
    task = ray.remote(max_retries=s.max_retries, retry_exceptions=[TaskFailed])(_s.run_task)
    fetch_task = ray.remote(max_retries=s.max_retries, retry_exceptions=True)(fetch)

    def run_stage(jobs: List[Any]) -> List[_s.Report]:
        return ray.get([task.remote(t, m, s.stats) for t, m in jobs])

    try:
        local = []
        for i, f in enumerate(files):
            if "://" in f:
                d = os.path.join(work, f"in-{i}")
                os.makedirs(d, exist_ok=True)
                f = ray.get(fetch_task.remote(f, d))
            local.append(f)
        inputs = s.inputs
        if inputs and "://" in inputs:
            d = os.path.join(work, "inputs")
            os.makedirs(d, exist_ok=True)
            inputs = ray.get(fetch_task.remote(inputs, d))
        elif inputs:
            inputs = os.path.abspath(inputs)
        buckets = s.buckets or max(1, 4 * int(ray.cluster_resources().get("CPU", 1)))
        width = _s.bucket_width(local, s.task_width, buckets)
        stages = _s.Stages(work, local, inputs, width, s.split_bytes, fail)
        stats: List[str] = []
        warns = _s.run_stages(s, options, stages, _s.name_of(s.name, local), run_stage, "rollstat_ray", stats)
        _s.issue(warns)
        if s.stats:
            import resource

            driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            stats.append(f"rollstat_ray: total {time.monotonic() - begun:.2f} s, driver peak memory {driver / 1e6:.1f} MB\n")
            sys.stderr.write("".join(stats))
    except BadInput as e:
        raise e.error() from None
    except ray.exceptions.RayTaskError as e:
        # The task's own exception (a task that failed every retry, or a refusal).
        cause = getattr(e, "cause", None) or e
        if isinstance(cause, BadInput):
            raise cause.error() from None
        raise RollstatError(str(cause)) from None
    finally:
        if not s.work_dir:
            shutil.rmtree(work, ignore_errors=True)
        if owned:
            ray.shutdown()


def aggregate(rollouts: Paths, *, out: PathLike, inputs: Optional[PathLike] = None, agent: Optional[str] = None,
              metrics: Iterable[str] = (), metric_dir: Optional[PathLike] = None, answer_key: Optional[str] = None,
              subset_key: Optional[str] = None, ddof: int = 0, key_metrics: Optional[Sequence[str]] = None,
              whole_table: bool = False, name: Optional[str] = None, buckets: Optional[int] = None,
              task_width: Optional[int] = None, address: Optional[str] = None, work_dir: Optional[PathLike] = None,
              max_retries: int = 3, split_bytes: int = 1 << 30, stats: bool = False) -> None:
    """`rollstat aggregate` over a sweep in many files, on Ray: the bytes of the
    single-machine command, written to `out`.

    `rollouts` are files, globs or URIs, in order; `inputs` the materialized inputs.
    `agent`, `metrics`, `metric_dir`, `answer_key`, `subset_key`, `ddof` and
    `key_metrics` are those of :func:`rollstat.aggregate`; `whole_table=True` merges the
    slices as one table. The cluster: `address` (default: start a local Ray),
    `buckets` or `task_width`, `work_dir`, `max_retries`, `split_bytes`, `stats` (as
    the flags of ``python -m rollstat.ray``). A wrong type raises `TypeError` naming the
    parameter; a refused sweep `InputError`, a task that failed every retry
    `RollstatError`; the merge's warnings are issued as `RollstatWarning`."""
    _drive(*_s.checked("aggregate", locals(), "address"))


def profile(rollouts: Paths, *, out_dir: PathLike, inputs: PathLike, allow_partial: bool = False,
            metrics: Iterable[str] = (), metric_dir: Optional[PathLike] = None, answer_key: Optional[str] = None,
            subset_key: Optional[str] = None, ddof: int = 0, whole_table: bool = False, name: Optional[str] = None,
            buckets: Optional[int] = None, task_width: Optional[int] = None, address: Optional[str] = None,
            work_dir: Optional[PathLike] = None, max_retries: int = 3, split_bytes: int = 1 << 30,
            stats: bool = False) -> None:
    """`rollstat profile` over a sweep in many files, on Ray: the three artifacts into
    `out_dir`, named after `name` (see :func:`aggregate`; `allow_partial` and the metric
    options are those of :func:`rollstat.profile`)."""
    _drive(*_s.checked("profile", locals(), "address"))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line: parsed into a call of :func:`aggregate` or :func:`profile`."""
    return _s.main(_s.Driver(__doc__ or "", "address", "Ray cluster address (default: start a local Ray)", "node",
                             "rollstat_ray", aggregate, profile), argv)


if __name__ == "__main__":
    sys.exit(main())
