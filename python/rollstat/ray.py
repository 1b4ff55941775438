"""Run `rollstat aggregate` or `rollstat profile` over a sweep split into many files,
on a Ray cluster: one `rollstat shard` task per file (and per file of materialized
inputs), one `rollstat join` task per bucket of tasks, one `rollstat merge` task. The output is byte-identical to the
single-machine command on the files concatenated.

    python -m rollstat.ray aggregate --rollouts 'runs/*.jsonl' --out agg.json
    python -m rollstat.ray profile --rollouts a.jsonl b.jsonl --inputs in.jsonl --out-dir prof/

or from Python, `rollstat.ray.aggregate(...)` and `rollstat.ray.profile(...)`.

Every task runs the `rollstat` command of the rollstat package installed on its node
(the one beside the node's Python, else on PATH; --rollstat PATH names another), on
files in a work folder every node can read (--work-dir). Install the package on every
node, or give Ray `runtime_env={"pip": ["rollstat"]}` (or the wheel's path). Flags this
driver does not know are passed to `rollstat merge`. See docs/distributed.md.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

# Exit status of rollstat for bad input: not retried.
BAD_INPUT = 2


class TaskFailed(Exception):
    """A rollstat task failed on its own (exit status 1, a crash, a lost node): retried."""


class BadInput(Exception):
    """rollstat refused its input (exit status 2): retrying cannot help."""


def find_rollstat():
    """The rollstat command a task runs when no --rollstat was given: the package's own
    command beside this Python (a venv's bin/), else the one on PATH. Evaluated where
    the task runs."""
    beside = os.path.join(os.path.dirname(sys.executable), "rollstat")
    if os.access(beside, os.X_OK):
        return beside
    on_path = shutil.which("rollstat")
    if on_path:
        return on_path
    raise TaskFailed("no rollstat command beside this node's Python or on its PATH: install the rollstat "
                     "package there (pip install rollstat), or pass --rollstat PATH")


def expand_inputs(specs):
    """Local paths, globs and file:// URIs as local paths; other URIs as they are."""
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
            sys.exit(f"rollstat_ray: {s}: no file matches")
        out.extend(os.path.abspath(h) for h in hits)
    return out


def max_task_hint(path, edge=1 << 20):
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


def byte_ranges(path, split):
    """`--range` values that tile a file in pieces of about `split` bytes: a line belongs
    to the range holding its first byte. `[None]` (the whole file) for a small file, a
    compressed one (which cannot be entered midway) or a pipe."""
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
    return [f"{s}:{s + split}" for s in starts[:-1]] + [f"{starts[-1]}:"]


class Stages:
    """The rollstat commands of a sweep's three stages, for any scheduler: shard tasks
    (each rollouts file, or byte range of a large one, in order; then the inputs file
    the same way), join tasks (one per bucket of rollouts, then per bucket of input
    rows, read from the shards' small manifests only), one merge. `fail` names a task
    whose first attempt fails (STAGE:K), for tests of the retries."""

    def __init__(self, rollstat, work, files, inputs, width, split_bytes, fail=""):
        self.rollstat, self.work, self.width, self.fail = rollstat, work, width, fail
        # In file order, then range order: the order join reads a bucket's slices in.
        self.jobs = [(f, r, False) for f in files for r in byte_ranges(f, split_bytes)]
        if inputs:
            self.jobs += [(inputs, r, True) for r in byte_ranges(inputs, split_bytes)]
        self.shard_dirs = [os.path.join(work, f"shard-{k}") for k in range(len(self.jobs))]
        self.parts, self.input_parts = [], []

    def marker(self, stage, k):
        """The file marking that task's injected failure as done, or None."""
        return os.path.join(self.work, f"failed-once-{stage}-{k}") if self.fail == f"{stage}:{k}" else None

    def shards(self):
        """(command, failure marker) of each shard task."""
        out = []
        for k, ((f, r, is_inputs), d) in enumerate(zip(self.jobs, self.shard_dirs)):
            cmd = [self.rollstat, "-q", "shard", f, "--out-dir", d, "--task-width", str(self.width)]
            if is_inputs:
                cmd.append("--inputs")
            if r is not None:
                cmd += ["--range", r]
            out.append((cmd, self.marker("shard", k)))
        return out

    def joins(self):
        """(command, failure marker) of each join task, once the shards are done."""
        by_bucket, inputs_by_bucket = {}, {}
        for d, (_f, _r, is_inputs) in zip(self.shard_dirs, self.jobs):
            with open(os.path.join(d, "manifest.json")) as m:
                for b, _rows in json.load(m)["buckets"]:
                    into, stem = (inputs_by_bucket, "i") if is_inputs else (by_bucket, "b")
                    into.setdefault(b, []).append(os.path.join(d, f"{stem}{b}.slice"))
        joins = [(os.path.join(self.work, f"part-b{b}.slice"), by_bucket[b], self.parts) for b in sorted(by_bucket)]
        joins += [(os.path.join(self.work, f"part-i{b}.slice"), inputs_by_bucket[b], self.input_parts)
                  for b in sorted(inputs_by_bucket)]
        out = []
        for k, (path, slices, into) in enumerate(joins):
            into.append(path)
            out.append(([self.rollstat, "-q", "join", *slices, "--out", path], self.marker("join", k)))
        return out

    def merge(self, command, name, dest, passthrough):
        """(command, failure marker) of the merge, once the joins are done."""
        cmd = [self.rollstat, "merge", command, "--name", name, *dest, *passthrough, "--", *self.parts,
               *self.input_parts]
        return cmd, self.marker("merge", 0)

    def statistics_rounds(self, command, passthrough, run_stage, stats):
        """The merge's statistics as rounds on the
        cluster, a share task per bucket then one combine task, until the plan is done.
        `run_stage` runs a list of (command, failure marker) as tasks and returns their
        reports; a line per round goes to `stats`. The flags that make the merge take
        the finished plan."""
        inputs_of = {}
        for p in self.input_parts:
            inputs_of[int(re.search(r"part-i(-?\d+)\.slice$", p).group(1))] = p
        plan = None
        for r in range(16):
            jobs, shares = [], []
            for k, part in enumerate(self.parts):
                b = int(re.search(r"part-b(-?\d+)\.slice$", part).group(1))
                # A bucket's input rows are in the input bucket of the same number (one
                # width); a bucket with none still gets an input slice, so that its
                # rollouts count as having no input row, as in the merge.
                ins = [inputs_of.get(b, self.input_parts[0])] if self.input_parts else []
                share = os.path.join(self.work, f"share-{r}-{k}")
                shares.append(share)
                cmd = [self.rollstat, "-q", "merge", command, "--share-out", share, *passthrough]
                cmd += ["--plan", plan] if plan else []
                jobs.append(([*cmd, "--", part, *ins], self.marker(f"share{r}", k)))
            started = time.monotonic()
            reports = run_stage(jobs)
            nxt = os.path.join(self.work, f"plan-{r}")
            cmd = [self.rollstat, "-q", "merge", "combine", "--out", nxt, *(["--plan", plan] if plan else []), *shares]
            report = run_stage([(cmd, self.marker(f"combine{r}", 0))])[0]
            stats.append(stage_line(f"round{r}", started, reports + [report]))
            plan = nxt
            said = report[3].strip()
            if said == "done":
                return ["--plan", plan]
            if said != "more":
                raise TaskFailed(f"merge combine said {said!r}, not `more` or `done`")
        raise TaskFailed("the statistics rounds did not finish in 16 rounds")

    def wants_rounds(self, passthrough):
        """Whether the merge reads bucket by bucket, so that its statistics run as
        rounds on the cluster: some buckets, and not what `merge` reads as one table
        (`--whole-table`, custom metrics; the joined slices are in task order)."""
        whole = {"--whole-table", "--metric"}
        return bool(self.parts) and not any(f.split("=")[0] in whole for f in passthrough)


def bucket_width(files, task_width, buckets):
    """--task-width, or the width giving about `buckets` buckets over the largest task
    index seen near the files' ends."""
    if task_width is not None:
        return task_width
    hints = [h for h in (max_task_hint(f) for f in files) if h is not None]
    top = max(hints) if hints else buckets
    return max(1, -(-(top + 1) // buckets))


def merge_destination(a):
    """The merge's output flags for `aggregate` (--out) or `profile` (--out-dir)."""
    return ["--out", os.path.abspath(a.out)] if a.command == "aggregate" else ["--out-dir", os.path.abspath(a.out_dir)]


def run_rollstat(args, fail_marker=None, measure=False):
    """Runs one rollstat command; raises TaskFailed (retried) or BadInput (not).

    Returns rollstat's stderr, the task's wall time (s), the peak resident memory of
    the rollstat process (bytes; with `measure`, else 0) and its stdout."""
    if fail_marker and not os.path.exists(fail_marker):
        # A failure injected for tests: the first attempt dies, the retry runs.
        open(fail_marker, "w").close()
        raise TaskFailed(f"injected failure of {' '.join(args[1:3])}")
    env = None
    if measure:
        # rollstat's trace ends with the process's own peak resident memory (its VmHWM,
        # which, unlike the rusage of a child forked from this Python worker, does not
        # count the worker's memory from before the exec).
        env = dict(os.environ, ROLLSTAT_TRACE="1")
    if args[0] == "rollstat":
        # The command of the package installed where this task runs.
        args = [find_rollstat(), *args[1:]]
    start = time.monotonic()
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    wall = time.monotonic() - start
    peak = 0
    kept = []
    for line in p.stderr.splitlines(keepends=True):
        if measure and line.startswith("trace: "):
            m = re.search(r"\(peak (\d+) MB\)", line)
            if m:
                peak = max(peak, int(m.group(1)) << 20)
        else:
            kept.append(line)
    stderr = "".join(kept)
    if p.returncode == BAD_INPUT:
        raise BadInput(stderr.strip())
    if p.returncode != 0:
        raise TaskFailed(f"{' '.join(args)}: exit status {p.returncode}: {stderr.strip()}")
    return stderr, wall, peak, p.stdout


def stage_line(stage, started, results):
    """One line of --stats: a stage's wall time and its tasks' slowest time and peak memory."""
    n = len(results)
    slowest = max(r[1] for r in results)
    peak = max(r[2] for r in results)
    return (f"rollstat_ray: {stage:<7} {n:>5} task{'s' if n != 1 else ' '} {time.monotonic() - started:8.2f} s"
            f"  slowest task {slowest:7.2f} s  peak task memory {peak / 1e6:9.1f} MB\n")


def fetch(uri, dest_dir):
    """Copies a file from any filesystem pyarrow knows to `dest_dir`; returns the copy."""
    import pyarrow.fs as pafs

    fs, path = pafs.FileSystem.from_uri(uri)
    dest = os.path.join(dest_dir, os.path.basename(path))
    with fs.open_input_stream(path) as src, open(dest, "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return dest


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["aggregate", "profile"])
    ap.add_argument("--rollouts", nargs="+", required=True, help="rollouts files, globs or URIs, in order")
    ap.add_argument("--inputs", default=None,
                    help="materialized inputs file or URI; sharded by bucket like the rollouts, so the merge "
                         "never holds it whole")
    ap.add_argument("--out", help="aggregate: output file")
    ap.add_argument("--out-dir", help="profile: folder for the three artifacts")
    ap.add_argument("--name", default=None, help="the sweep's file name (profile names its artifacts after it)")
    ap.add_argument("--buckets", type=int, default=None, help="buckets of tasks (default: 4 per CPU of the cluster)")
    ap.add_argument("--task-width", type=int, default=None, help="tasks per bucket (default: from --buckets)")
    ap.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    ap.add_argument("--rollstat", default=None,
                    help="a rollstat binary every node can run (default: the package's own command on each node)")
    ap.add_argument("--work-dir", default=None, help="folder every node can read and write (default: a temp folder)")
    ap.add_argument("--max-retries", type=int, default=3, help="retries of a failed task")
    ap.add_argument("--split-bytes", type=int, default=1 << 30,
                    help="shard a file larger than this in byte ranges, one task each (default 1 GiB; 0: never)")
    ap.add_argument("--stats", action="store_true",
                    help="print each stage's tasks, wall time, slowest task and peak task memory to stderr")
    ap.add_argument("--keep-work-dir", action="store_true", help=argparse.SUPPRESS)
    a, passthrough = ap.parse_known_args(argv)
    if a.command == "aggregate" and not a.out:
        ap.error("aggregate needs --out FILE")
    if a.command == "profile" and not a.out_dir:
        ap.error("profile needs --out-dir DIR")

    begun = time.monotonic()
    import ray

    # Without --rollstat each task finds the package's command on its own node.
    rollstat = os.path.abspath(a.rollstat) if a.rollstat else "rollstat"
    files = expand_inputs(a.rollouts)
    # A caller already connected to Ray (a notebook, a job) keeps its connection; one
    # this call makes is closed at the end.
    owned = not ray.is_initialized()
    if owned:
        ray.init(address=a.address, log_to_driver=False, include_dashboard=False)
    work = a.work_dir or tempfile.mkdtemp(prefix="rollstat-ray-", dir=os.environ.get("ROLLSTAT_RAY_TMP"))
    os.makedirs(work, exist_ok=True)
    # ROLLSTAT_RAY_FAIL_ONCE=join:K (or shard:K, merge:0): that task's first attempt fails.
    fail = os.environ.get("ROLLSTAT_RAY_FAIL_ONCE", "")
    task = ray.remote(max_retries=a.max_retries, retry_exceptions=[TaskFailed])(run_rollstat)
    fetch_task = ray.remote(max_retries=a.max_retries, retry_exceptions=True)(fetch)
    try:
        local = []
        for i, f in enumerate(files):
            if "://" in f:
                d = os.path.join(work, f"in-{i}")
                os.makedirs(d, exist_ok=True)
                f = ray.get(fetch_task.remote(f, d))
            local.append(f)
        inputs = a.inputs
        if inputs and "://" in inputs:
            d = os.path.join(work, "inputs")
            os.makedirs(d, exist_ok=True)
            inputs = ray.get(fetch_task.remote(inputs, d))
        elif inputs:
            inputs = os.path.abspath(inputs)
        buckets = a.buckets or max(1, 4 * int(ray.cluster_resources().get("CPU", 1)))
        width = bucket_width(local, a.task_width, buckets)
        stages = Stages(rollstat, work, local, inputs, width, a.split_bytes, fail)
        stats = []
        started = time.monotonic()
        refs = [task.remote(cmd, m, a.stats) for cmd, m in stages.shards()]
        stats.append(stage_line("shard", started, ray.get(refs)))
        started = time.monotonic()
        refs = [task.remote(cmd, m, a.stats) for cmd, m in stages.joins()]
        stats.append(stage_line("join", started, ray.get(refs)))
        name = a.name or (os.path.basename(local[0]) if len(local) == 1 else "rollouts.jsonl")
        merge_flags = passthrough
        if stages.wants_rounds(passthrough):
            run_stage = lambda jobs: ray.get([task.remote(c, m, a.stats) for c, m in jobs])  # noqa: E731
            merge_flags = passthrough + stages.statistics_rounds(a.command, passthrough, run_stage, stats)
        cmd, m = stages.merge(a.command, name, merge_destination(a), merge_flags)
        started = time.monotonic()
        report = ray.get(task.remote(cmd, m, a.stats))
        stats.append(stage_line("merge", started, [report]))
        sys.stderr.write(report[0])
        if a.stats:
            import resource

            driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
            stats.append(f"rollstat_ray: total {time.monotonic() - begun:.2f} s, driver peak memory {driver / 1e6:.1f} MB\n")
            sys.stderr.write("".join(stats))
    except BadInput as e:
        sys.stderr.write(f"{e}\n")
        return BAD_INPUT
    except ray.exceptions.RayTaskError as e:
        cause = e.as_instanceof_cause() if hasattr(e, "as_instanceof_cause") else e
        if isinstance(cause, BadInput):
            sys.stderr.write(f"{cause}\n")
            return BAD_INPUT
        sys.stderr.write(f"rollstat_ray: {cause}\n")
        return 1
    finally:
        if not a.work_dir and not a.keep_work_dir:
            shutil.rmtree(work, ignore_errors=True)
        if owned:
            ray.shutdown()
    return 0


def _flags(command, rollouts, kw):
    """A driver's command line from Python arguments: `name=value` as `--name value`,
    True as a bare flag, False and None left out, lists repeated after one flag."""
    argv = [command, "--rollouts", *([rollouts] if isinstance(rollouts, (str, os.PathLike)) else rollouts)]
    for k, v in kw.items():
        flag = "--" + k.replace("_", "-")
        if v is None or v is False:
            continue
        if v is True:
            argv.append(flag)
        elif isinstance(v, (list, tuple)):
            argv += [flag, *map(str, v)]
        else:
            argv += [flag, str(v)]
    return [os.fspath(x) for x in argv]


def _run(main_fn, argv):
    from ._errors import InputError, RollstatError

    code = main_fn(argv)
    if code == BAD_INPUT:
        raise InputError("the sweep was refused (see the message above)", None, None, None)
    if code != 0:
        raise RollstatError(f"the driver failed with exit status {code}")


def aggregate(rollouts, *, out, inputs=None, **options):
    """`rollstat aggregate` over a sweep in many files, on Ray: the bytes of the
    single-machine command. `options` are the command-line flags by name (`address=`,
    `buckets=`, `work_dir=`, `whole_table=True`, …). Raises `InputError` when the sweep is
    refused, `RollstatError` when the driver fails."""
    _run(main, _flags("aggregate", rollouts, dict(out=out, inputs=inputs, **options)))


def profile(rollouts, *, out_dir, inputs, **options):
    """`rollstat profile` over a sweep in many files, on Ray (see `aggregate`)."""
    _run(main, _flags("profile", rollouts, dict(out_dir=out_dir, inputs=inputs, **options)))


if __name__ == "__main__":
    sys.exit(main())
