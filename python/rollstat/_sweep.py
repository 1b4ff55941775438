"""The stages of a sweep sharded over a cluster, for any scheduler (``rollstat.ray``,
``rollstat.spark``): a shard task per rollouts file (or byte range of a large one, and
the same for the materialized inputs), a join task per bucket of tasks, the merge's
statistics as rounds of share and combine tasks, one merge. Each task is a typed call
of the native module (the workflows of ``rollstat shard``, ``join`` and ``merge``), run
in the worker's own Python; the driver moves only file names.

The drivers' Python functions check their arguments here (a wrong type is a
``TypeError`` naming the parameter) before any scheduler is started, and their command
lines parse into calls of those functions."""

from __future__ import annotations

import argparse
import glob
import os
import re
import sys
import time
import urllib.parse
import warnings as _warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

from . import _args as _a
from . import _rollstat
from ._errors import InputError, RollstatError, RollstatWarning

# The exit status of a driver whose sweep was refused (that of the command).
BAD_INPUT = 2


class TaskFailed(Exception):
    """A task failed on its own (rollstat's own failure, a crash, a lost node): retried."""


class BadInput(Exception):
    """A task's input was refused: retrying cannot help. Its arguments are those of the
    :class:`InputError` it stands for (which travels between processes as this)."""

    def error(self) -> InputError:
        return InputError(*self.args)


# ---------------------------------------------------------------------------------------
# The merge's options and the driver's, checked.


@dataclass(frozen=True)
class Options:
    """What the merge computes: the options of ``rollstat.aggregate`` or
    ``rollstat.profile`` that a merge over slices takes, and how it holds the sweep."""

    command: str
    agent: Optional[str] = None
    metrics: Tuple[str, ...] = ()
    metric_dir: Optional[str] = None
    answer_key: Optional[str] = None
    subset_key: Optional[str] = None
    ddof: int = 0
    key_metrics: Tuple[str, ...] = ()
    allow_partial: bool = False
    whole_table: bool = False

    @property
    def rounds(self) -> bool:
        """Whether the merge may read bucket by bucket, so that its statistics run as
        rounds on the cluster (not what it reads as one table: `whole_table`, custom
        metrics)."""
        return not self.whole_table and not self.metrics


def options(command: str, *, agent: Any = None, metrics: Any = (), metric_dir: Any = None, answer_key: Any = None,
            subset_key: Any = None, ddof: Any = 0, key_metrics: Any = None, allow_partial: Any = False,
            whole_table: Any = False) -> Options:
    """The merge's options from the Python arguments, each checked as ``rollstat.aggregate``
    and ``rollstat.profile`` check theirs."""
    return Options(
        command=command, agent=_a.opt_text("agent", agent), metrics=tuple(_a.texts("metrics", metrics)),
        metric_dir=_a.opt_path("metric_dir", metric_dir), answer_key=_a.opt_text("answer_key", answer_key),
        subset_key=_a.opt_text("subset_key", subset_key), ddof=_a.count("ddof", ddof),
        key_metrics=tuple([] if key_metrics is None else _a.texts("key_metrics", key_metrics)),
        allow_partial=_a.flag("allow_partial", allow_partial), whole_table=_a.flag("whole_table", whole_table))


@dataclass(frozen=True)
class Sweep:
    """What the driver reads and writes, and how it cuts the work."""

    rollouts: Tuple[str, ...]
    inputs: Optional[str]
    out: str
    name: Optional[str] = None
    buckets: Optional[int] = None
    task_width: Optional[int] = None
    work_dir: Optional[str] = None
    max_retries: int = 3
    split_bytes: int = 1 << 30
    stats: bool = False


def sweep(rollouts: Any, *, out: Any, out_name: str, inputs: Any, name: Any = None, buckets: Any = None,
          task_width: Any = None, work_dir: Any = None, max_retries: Any = 3, split_bytes: Any = 1 << 30,
          stats: Any = False) -> Sweep:
    """The driver's arguments, checked; `out_name` is the parameter `out` was given as
    (``out`` or ``out_dir``)."""
    return Sweep(
        rollouts=tuple(_a.paths("rollouts", rollouts)), inputs=_a.opt_path("inputs", inputs),
        out=os.path.abspath(_a.path(out_name, out)), name=_a.opt_text("name", name),
        buckets=_a.opt_count("buckets", buckets, 1), task_width=_a.opt_count("task_width", task_width, 1),
        work_dir=_a.opt_path("work_dir", work_dir), max_retries=_a.count("max_retries", max_retries),
        split_bytes=_a.count("split_bytes", split_bytes), stats=_a.flag("stats", stats))


# The parameters of each driver function that are the merge's options.
MERGE_OPTIONS = {
    "aggregate": ("agent", "metrics", "metric_dir", "answer_key", "subset_key", "ddof", "key_metrics", "whole_table"),
    "profile": ("allow_partial", "metrics", "metric_dir", "answer_key", "subset_key", "ddof", "whole_table"),
}


def checked(command: str, args: Dict[str, Any], scheduler: str) -> Tuple[Sweep, Options, Optional[str]]:
    """A driver function's arguments (its ``locals()``), checked: the sweep, the merge's
    options and the scheduler's address (`scheduler` names its parameter)."""
    args = dict(args)
    merge = options(command, **{k: args.pop(k) for k in MERGE_OPTIONS[command]})
    target = _a.opt_text(scheduler, args.pop(scheduler))
    out_name = "out" if command == "aggregate" else "out_dir"
    if command == "profile":
        args["inputs"] = _a.path("inputs", args["inputs"])
    return sweep(out_name=out_name, out=args.pop(out_name), **args), merge, target


# ---------------------------------------------------------------------------------------
# The tasks: each a typed call of the native module.

Warnings = List[str]


@dataclass(frozen=True)
class Shard:
    """`shard`: one file (or the lines starting in `byte_range` of it) into slices by
    bucket of tasks; returns each bucket with its rows."""

    path: str
    out_dir: str
    task_width: int
    byte_range: Optional[Tuple[int, Optional[int]]]
    inputs: bool
    what = "shard"

    def __call__(self) -> Tuple[Any, Warnings]:
        return _rollstat.shard(self.path, self.out_dir, self.task_width, self.byte_range, self.inputs)


@dataclass(frozen=True)
class Join:
    """`join`: one bucket's slices, in file order, into one slice."""

    slices: Tuple[str, ...]
    out: str
    what = "join"

    def __call__(self) -> Tuple[Any, Warnings]:
        return _rollstat.join(list(self.slices), self.out)


@dataclass(frozen=True)
class Merge:
    """`merge aggregate|profile` over `slices`: the artifacts into `out` (the file, or
    profile's folder), or with `share_out` one round's shares of the statistics."""

    options: Options
    slices: Tuple[str, ...]
    name: str
    plan: Optional[str] = None
    share_out: Optional[str] = None
    out: Optional[str] = None
    what = "merge"

    def __call__(self) -> Tuple[Any, Warnings]:
        o = self.options
        slices = (list(self.slices), self.name, None, o.whole_table, self.plan, self.share_out)
        metrics = (list(o.metrics), o.metric_dir, o.answer_key, o.subset_key, o.ddof)
        if o.command == "aggregate":
            shares, files, warns = _rollstat.merge_aggregate(slices, metrics, o.agent, list(o.key_metrics), self.out)
        else:
            shares, files, warns = _rollstat.merge_profile(slices, metrics, o.allow_partial, self.out)
        return (shares, files), warns


@dataclass(frozen=True)
class Combine:
    """`merge combine`: one round's shares into the next plan; returns whether another
    round is needed."""

    shares: Tuple[str, ...]
    plan: Optional[str]
    out: str
    what = "merge combine"

    def __call__(self) -> Tuple[Any, Warnings]:
        return _rollstat.merge_combine(list(self.shares), self.plan, self.out)


Task = Any  # Shard, Join, Merge or Combine
# What a task reports: its warnings, its wall time (s), the peak resident memory of its
# process while it ran (bytes; 0 unless measured) and its value.
Report = Tuple[Warnings, float, int, Any]
# Runs (task, failure marker) pairs as one stage of tasks and returns their reports.
RunStage = Callable[[List[Tuple[Task, Optional[str]]]], List[Report]]


def _reset_peak() -> None:
    """Lets this process's peak resident memory start again from what it holds now."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak() -> int:
    """This process's peak resident memory (bytes) since the last reset."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_task(task: Task, fail_marker: Optional[str] = None, measure: bool = False) -> Report:
    """Runs one task in this process; raises TaskFailed (to be retried) or BadInput (not)."""
    if fail_marker and not os.path.exists(fail_marker):
        # A failure injected for tests: the first attempt dies, the retry runs.
        open(fail_marker, "w").close()
        raise TaskFailed(f"injected failure of {task.what}")
    if measure:
        _reset_peak()
    start = time.monotonic()
    try:
        value, warns = task()
    except InputError as e:
        raise BadInput(str(e), e.path, e.line, e.key) from None
    except RollstatError as e:
        raise TaskFailed(f"{task.what}: {e}") from None
    return list(warns), time.monotonic() - start, _peak() if measure else 0, value


# ---------------------------------------------------------------------------------------
# The stages.


def expand_inputs(specs: Iterable[str], key: str = "rollouts") -> List[str]:
    """Local paths, globs and file:// URIs as local paths; other URIs as they are; `key`
    names the parameter they were given as."""
    out = []
    for s in specs:
        scheme = urllib.parse.urlparse(s).scheme
        if scheme == "file":
            s = urllib.parse.unquote(urllib.parse.urlparse(s).path)
        elif scheme and len(scheme) > 1:
            out.append(s)
            continue
        hits = sorted(glob.glob(s)) if glob.has_magic(s) else [s]
        if not hits:
            raise InputError(f"{key}: {s}: no file matches", s, None, key)
        out.extend(os.path.abspath(h) for h in hits)
    return out


def max_task_hint(path: str, edge: int = 1 << 20) -> Optional[int]:
    """The largest `_ng_task_index` in the first and last MB of a local file, or None:
    enough to size the buckets (their width only balances the work, never changes the
    output)."""
    try:
        with open(path, "rb") as f:
            head = f.read(edge)
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - edge))
            tail = f.read(edge)
    except OSError:
        return None
    found = [int(m) for m in re.findall(rb'"_ng_task_index"\s*:\s*(-?\d+)', head + b"\n" + tail)]
    return max(found) if found else None


def byte_ranges(path: str, split: int) -> List[Optional[Tuple[int, Optional[int]]]]:
    """Byte ranges (start, end; end None for the rest) that tile a file in pieces of
    about `split` bytes: a line belongs to the range holding its first byte. `[None]`
    (the whole file) for a small file, a compressed one (which cannot be entered
    midway) or a pipe."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return [None]
    compressed = head[:2] == b"\x1f\x8b" or head == b"\x28\xb5\x2f\xfd"
    if split <= 0 or size <= split or compressed or not os.path.isfile(path):
        return [None]
    starts = list(range(0, size, split))
    return [(s, s + split) for s in starts[:-1]] + [(starts[-1], None)]


def bucket_width(files: Sequence[str], task_width: Optional[int], buckets: int) -> int:
    """`task_width`, or the width giving about `buckets` buckets over the largest task
    index seen near the files' ends."""
    if task_width is not None:
        return task_width
    hints = [h for h in (max_task_hint(f) for f in files) if h is not None]
    top = max(hints) if hints else buckets
    return max(1, -(-(top + 1) // buckets))


def stage_line(prefix: str, stage: str, started: float, results: Sequence[Report]) -> str:
    """One line of `stats`: a stage's wall time and its tasks' slowest time and peak memory."""
    n = len(results)
    slowest = max(r[1] for r in results)
    peak = max(r[2] for r in results)
    return (f"{prefix}: {stage:<7} {n:>5} task{'s' if n != 1 else ' '} {time.monotonic() - started:8.2f} s"
            f"  slowest task {slowest:7.2f} s  peak task memory {peak / 1e6:9.1f} MB\n")


class Stages:
    """The tasks of a sweep's stages: shard tasks (each rollouts file, or byte range of a
    large one, in order; then the inputs file the same way), join tasks (one per bucket of
    rollouts, then per bucket of input rows, from what the shard tasks reported), the
    statistics' rounds, one merge. `fail` names a task whose first attempt fails
    (STAGE:K), for tests of the retries."""

    def __init__(self, work: str, files: Sequence[str], inputs: Optional[str], width: int, split_bytes: int,
                 fail: str = "") -> None:
        self.work, self.width, self.fail = work, width, fail
        # In file order, then range order: the order join reads a bucket's slices in.
        self.jobs = [(f, r, False) for f in files for r in byte_ranges(f, split_bytes)]
        if inputs:
            self.jobs += [(inputs, r, True) for r in byte_ranges(inputs, split_bytes)]
        self.shard_dirs = [os.path.join(work, f"shard-{k}") for k in range(len(self.jobs))]
        # Each joined bucket of rollouts and of input rows: (bucket, slice).
        self.parts: List[Tuple[int, str]] = []
        self.input_parts: List[Tuple[int, str]] = []

    def marker(self, stage: str, k: int) -> Optional[str]:
        """The file marking that task's injected failure as done, or None."""
        return os.path.join(self.work, f"failed-once-{stage}-{k}") if self.fail == f"{stage}:{k}" else None

    def shards(self) -> List[Tuple[Task, Optional[str]]]:
        return [(Shard(f, d, self.width, r, is_inputs), self.marker("shard", k))
                for k, ((f, r, is_inputs), d) in enumerate(zip(self.jobs, self.shard_dirs))]

    def joins(self, sharded: Sequence[Report]) -> List[Tuple[Task, Optional[str]]]:
        """The join tasks, from the buckets each shard task reported."""
        by_bucket: Dict[int, List[str]] = {}
        inputs_by_bucket: Dict[int, List[str]] = {}
        for d, (_f, _r, is_inputs), report in zip(self.shard_dirs, self.jobs, sharded):
            into, stem = (inputs_by_bucket, "i") if is_inputs else (by_bucket, "b")
            for b, _rows in report[3]:
                into.setdefault(b, []).append(os.path.join(d, f"{stem}{b}.slice"))
        self.parts = [(b, os.path.join(self.work, f"part-b{b}.slice")) for b in sorted(by_bucket)]
        self.input_parts = [(b, os.path.join(self.work, f"part-i{b}.slice")) for b in sorted(inputs_by_bucket)]
        joins = [(p, by_bucket[b]) for b, p in self.parts] + [(p, inputs_by_bucket[b]) for b, p in self.input_parts]
        return [(Join(tuple(slices), path), self.marker("join", k)) for k, (path, slices) in enumerate(joins)]

    def all_parts(self) -> Tuple[str, ...]:
        return tuple(p for _, p in self.parts) + tuple(p for _, p in self.input_parts)

    def statistics_rounds(self, options: Options, name: str, run_stage: RunStage, stats: List[str],
                          prefix: str) -> str:
        """The merge's statistics as rounds on the cluster, a share task per bucket then
        one combine task, until the plan is done; a line per round goes to `stats`.
        Returns the finished plan."""
        inputs_of = dict(self.input_parts)
        plan = None
        for r in range(16):
            jobs: List[Tuple[Task, Optional[str]]] = []
            shares = []
            for k, (b, part) in enumerate(self.parts):
                # A bucket's input rows are in the input bucket of the same number (one
                # width); a bucket with none still gets an input slice, so that its
                # rollouts count as having no input row, as in the merge.
                ins = (inputs_of.get(b, self.input_parts[0][1]),) if self.input_parts else ()
                share = os.path.join(self.work, f"share-{r}-{k}")
                shares.append(share)
                jobs.append((Merge(options, (part, *ins), name, plan, share_out=share), self.marker(f"share{r}", k)))
            started = time.monotonic()
            reports = run_stage(jobs)
            nxt = os.path.join(self.work, f"plan-{r}")
            report = run_stage([(Combine(tuple(shares), plan, nxt), self.marker(f"combine{r}", 0))])[0]
            stats.append(stage_line(prefix, f"round{r}", started, reports + [report]))
            plan = nxt
            if not report[3]:
                return plan
        raise TaskFailed("the statistics rounds did not finish in 16 rounds")


def name_of(given: Optional[str], files: Sequence[str]) -> str:
    """The sweep's file name: as given, else the one file's, else `rollouts.jsonl`."""
    return given or (os.path.basename(files[0]) if len(files) == 1 else "rollouts.jsonl")


def run_stages(s: Sweep, options: Options, stages: Stages, name: str, run_stage: RunStage, prefix: str,
               stats: List[str]) -> List[str]:
    """Runs a sweep's stages with `run_stage`; returns the merge's warnings. A line per
    stage goes to `stats`."""
    started = time.monotonic()
    sharded = run_stage(stages.shards())
    stats.append(stage_line(prefix, "shard", started, sharded))
    started = time.monotonic()
    joined = run_stage(stages.joins(sharded))
    stats.append(stage_line(prefix, "join", started, joined))
    plan = None
    if stages.parts and options.rounds:
        plan = stages.statistics_rounds(options, name, run_stage, stats, prefix)
    started = time.monotonic()
    report = run_stage([(Merge(options, stages.all_parts(), name, plan, out=s.out), stages.marker("merge", 0))])[0]
    stats.append(stage_line(prefix, "merge", started, [report]))
    return report[0]


def issue(warns: Sequence[str]) -> None:
    """Issues the merge's warnings as :class:`RollstatWarning`, attributed to the caller
    of the driver's function."""
    for w in warns:
        _warnings.warn(w, RollstatWarning, stacklevel=4)


# ---------------------------------------------------------------------------------------
# The drivers' command lines.


@dataclass(frozen=True)
class Driver:
    """A driver's command line: its description, its scheduler's option (`scheduler`,
    with its help), what a task runs on (`where`: node, executor), the prefix of its
    messages, and the functions it parses into calls of."""

    doc: str
    scheduler: str
    scheduler_help: str
    where: str
    prefix: str
    aggregate: Callable[..., None]
    profile: Callable[..., None]


def parser(d: Driver) -> argparse.ArgumentParser:
    """The command line both drivers share."""
    ap = argparse.ArgumentParser(description=d.doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["aggregate", "profile"])
    ap.add_argument("--rollouts", nargs="+", required=True, help="rollouts files, globs or URIs, in order")
    ap.add_argument("--inputs", default=None,
                    help="materialized inputs file or URI; sharded by bucket like the rollouts, so the merge "
                         "never holds it whole")
    ap.add_argument("--out", help="aggregate: output file")
    ap.add_argument("--out-dir", help="profile: folder for the three artifacts")
    ap.add_argument("--name", default=None, help="the sweep's file name (profile names its artifacts after it)")
    ap.add_argument("--buckets", type=int, default=None, help="buckets of tasks (default: 4 per CPU)")
    ap.add_argument("--task-width", type=int, default=None, help="tasks per bucket (default: from --buckets)")
    ap.add_argument(f"--{d.scheduler}", default=None, help=d.scheduler_help)
    ap.add_argument("--work-dir", default=None,
                    help=f"folder every {d.where} can read and write (default: a temp folder)")
    ap.add_argument("--max-retries", type=int, default=3, help="retries of a failed task")
    ap.add_argument("--split-bytes", type=int, default=1 << 30,
                    help="shard a file larger than this in byte ranges, one task each (default 1 GiB; 0: never)")
    ap.add_argument("--stats", action="store_true",
                    help="print each stage's tasks, wall time, slowest task and peak task memory to stderr")
    merge = ap.add_argument_group("what the merge computes (as `rollstat aggregate` and `profile`)")
    merge.add_argument("--agent", default=None, help="aggregate: label for rollouts that name no agent")
    merge.add_argument("--metric", dest="metrics", action="append", default=[], metavar="NAME",
                       help="add a metric to agent_metrics: pass_at_k, reward_variance, or a SQL metric (repeatable)")
    merge.add_argument("--metric-dir", default=None, help="folder of extra SQL metrics (NAME.sql each)")
    merge.add_argument("--answer-key", default=None, help="field holding the extracted answer")
    merge.add_argument("--subset-key", default=None, help="field naming each task's subset")
    merge.add_argument("--ddof", type=int, default=0, help="delta degrees of freedom of reward_variance")
    merge.add_argument("--key-metric", dest="key_metrics", action="append", default=None, metavar="PATTERN",
                       help="aggregate: a key metric to select (repeatable)")
    merge.add_argument("--allow-partial", action="store_true",
                       help="profile: profile what completed when some input rows have no rollout")
    merge.add_argument("--whole-table", action="store_true",
                       help="merge reading every slice into one table instead of bucket by bucket (the same bytes)")
    merge.add_argument("--low-memory", action="store_true", help=argparse.SUPPRESS)
    return ap


def main(d: Driver, argv: Optional[Sequence[str]]) -> int:
    """Parses a driver's command line into a call of its `aggregate` or `profile` and
    runs it: warnings are printed as the command prints them, a refusal exits 2, a
    failure 1."""
    ap = parser(d)
    a = ap.parse_args(argv)
    own = {"aggregate": ("out", "agent", "key_metrics"), "profile": ("out_dir", "allow_partial")}
    for command, names in own.items():
        for n in names:
            if a.command != command and getattr(a, n) not in (None, False):
                ap.error(f"--{n.replace('_', '-').rstrip('s')} is for {command}")
    if a.command == "aggregate" and not a.out:
        ap.error("aggregate needs --out FILE")
    if a.command == "profile" and not a.out_dir:
        ap.error("profile needs --out-dir DIR")
    if a.command == "profile" and not a.inputs:
        ap.error("profile needs --inputs FILE")
    kw: Dict[str, Any] = {n: getattr(a, n) for n in (
        "inputs", "name", "buckets", "task_width", "work_dir", "max_retries", "split_bytes", "stats", "metrics",
        "metric_dir", "answer_key", "subset_key", "ddof", "whole_table", d.scheduler)}
    with _warnings.catch_warnings(record=True) as said:
        _warnings.simplefilter("always", RollstatWarning)
        try:
            if a.command == "aggregate":
                d.aggregate(a.rollouts, out=a.out, agent=a.agent, key_metrics=a.key_metrics, **kw)
            else:
                d.profile(a.rollouts, out_dir=a.out_dir, allow_partial=a.allow_partial, **kw)
        except InputError as e:
            sys.stderr.write(f"{e}\n")
            return BAD_INPUT
        except RollstatError as e:
            sys.stderr.write(f"{d.prefix}: {e}\n")
            return 1
        finally:
            for w in said:
                if issubclass(w.category, RollstatWarning):
                    sys.stderr.write(f"warning: {w.message}\n")
                else:
                    _warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return 0
