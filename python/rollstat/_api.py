"""The Python API: rollstat's commands as functions that return objects.

Each function checks its arguments (a wrong type is a ``TypeError`` naming the
parameter), builds the configuration the command builds from its flags, and runs the
same workflow in-process: one implementation, so a result and the command's output
never differ. Files a command writes are written into a private folder (or where
``out=`` / ``out_dir=`` says) and parsed when first asked for; ``.write()`` puts
exactly those bytes on disk. Tables stay in memory and leave through the Arrow C
stream interface. Warnings are issued as :class:`RollstatWarning` through
:mod:`warnings`, each distinct one once per call; nothing is printed.

The GIL is released while the engine works; Ctrl-C raises ``KeyboardInterrupt`` after
the run stopped, with nothing written and its private folder removed.
"""

from __future__ import annotations

import contextlib
import html
import inspect
import json
import numbers
import os
import shutil
import tempfile
import warnings as _warnings
import weakref
from collections.abc import Mapping
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union, overload

from . import _args as _a
from . import _rollstat
from ._args import PathLike, Paths
from ._errors import InputError, RollstatError, RollstatWarning
from ._table import Table, _html_table


# ---------------------------------------------------------------------------------------
# Private folders and copies.


@contextlib.contextmanager
def _private() -> Iterator[str]:
    """A private folder for a command's files: removed if the call fails or is
    interrupted; on success the result takes it (and removes it when collected)."""
    d = tempfile.mkdtemp(prefix="rollstat-")
    try:
        yield d
    except BaseException:
        shutil.rmtree(d, ignore_errors=True)
        raise


def _present(folder: str, names: Sequence[str]) -> List[str]:
    return [n for n in names if os.path.isfile(os.path.join(folder, n))]


def _copy_file(src: str, path: str, protected: Sequence[str]) -> None:
    """Copies ``src`` to ``path`` beside it first, then renames: a reader never sees half
    a file, and an input of the run is never overwritten."""
    for p in protected:
        with contextlib.suppress(OSError):
            if os.path.exists(path) and os.path.samefile(p, path):
                raise InputError(f"{path}: refusing to overwrite an input file with an output; "
                                 "choose another output path", path, None, None)
    if os.path.exists(path) and os.path.samefile(src, path):
        return
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".rollstat-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f, open(src, "rb") as g:
            shutil.copyfileobj(g, f, 1 << 20)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise

# ---------------------------------------------------------------------------------------
# Results.


class Files:
    """A command's files, by name: read when first asked for (``files``, the parsed
    properties), so a result costs what the command costs; ``write()`` copies them.

    They live in the result's own private folder, removed with the result (or in the
    ``out=`` / ``out_dir=`` the call was given, which stays)."""

    def __init__(self, folder: str, names: Sequence[str], inputs: Sequence[str], owned: bool) -> None:
        self._folder = folder
        self._names = list(names)
        self._inputs = list(inputs)
        self._bytes: Dict[str, bytes] = {}
        self._parsed: Dict[str, Any] = {}
        if owned:
            weakref.finalize(self, shutil.rmtree, folder, True)

    @property
    def names(self) -> List[str]:
        """The file names, as the command names them."""
        return list(self._names)

    def path(self, name: str) -> str:
        return os.path.join(self._folder, name)

    @property
    def files(self) -> Dict[str, bytes]:
        """Every file's bytes, by name."""
        return {n: self._read(n) for n in self._names}

    def _read(self, name: str) -> bytes:
        if name not in self._bytes:
            with open(self.path(name), "rb") as f:
                self._bytes[name] = f.read()
        return self._bytes[name]

    def _json(self, suffix: str) -> Any:
        name = next((n for n in self._names if n.endswith(suffix)), None)
        if name is None:
            return None
        if name not in self._parsed:
            text = self._read(name).decode("utf-8")
            if name.endswith(".jsonl"):
                self._parsed[name] = [json.loads(ln) for ln in text.splitlines() if ln.strip()]
            else:
                self._parsed[name] = json.loads(text)
        return self._parsed[name]

    def _write_one(self, name: str, dest: str) -> str:
        _copy_file(self.path(name), dest, self._inputs)
        return dest

    def _write_all(self, out_dir: PathLike) -> List[str]:
        out_dir = os.fspath(out_dir)
        os.makedirs(out_dir, exist_ok=True)
        return [self._write_one(n, os.path.join(out_dir, n)) for n in self._names]


class Aggregate(Files):
    """NeMo Gym's ``gym eval aggregate``: ``metrics`` is the ``_aggregate_metrics.json``
    content (one entry per run label; ``[]`` when nothing was scored), ``key_metrics``
    each label's key metrics, ``coverage`` what the score covers (failures left out by
    class, rows counted as zeros, expected and scored rollouts), ``health`` the rollout
    health check's ``quality_summary.json`` (``None`` without the check) and
    ``verdicts`` its per-record verdicts; ``write(path)`` writes the aggregate file."""

    def __init__(self, folder: str, names: Sequence[str], inputs: Sequence[str], owned: bool,
                 coverage: Dict[str, Any]) -> None:
        super().__init__(folder, names, inputs, owned)
        self.coverage: Dict[str, Any] = coverage

    @property
    def metrics(self) -> List[Dict[str, Any]]:
        return self._json("aggregate_metrics.json") or []

    @property
    def health(self) -> Optional[Dict[str, Any]]:
        return self._json("quality_summary.json")

    @property
    def verdicts(self) -> Optional[List[Dict[str, Any]]]:
        return self._json("rollout_verdicts.jsonl")

    @property
    def key_metrics(self) -> Dict[str, Dict[str, Any]]:
        # Each entry opens with its run label, `agent_ref.name`.
        return {entry["agent_ref"]["name"]: entry.get("key_metrics", {}) for entry in self.metrics}

    def write(self, path: PathLike) -> str:
        """Writes the aggregate file (the command's bytes) to ``path``; returns the path."""
        name = next((n for n in self._names if n.endswith("aggregate_metrics.json")), None)
        if name is None:
            raise RollstatError("nothing was scored, so there is no aggregate file to write")
        return self._write_one(name, os.fspath(path))

    def _repr_html_(self) -> str:
        rows = []
        for label, km in self.key_metrics.items():
            rows.append({"run": label, **{k: v for k, v in km.items() if not isinstance(v, (dict, list))}})
        cols: List[str] = []
        for r in rows:
            cols += [c for c in r if c not in cols]
        return _html_table(cols, [{c: r.get(c) for c in cols} for r in rows], len(rows), "key metrics")

    def __repr__(self) -> str:
        return f"<rollstat.Aggregate: {len(self.metrics)} run label(s): {', '.join(self.key_metrics)}>"


class Profile(Files):
    """NeMo Gym's ``gym eval profile`` artifacts: the reward profile (one dict per task
    and agent), the agent, repeat-level and completion metrics; ``write(out_dir)`` writes
    the files under the command's names."""

    @property
    def reward_profile(self) -> List[Dict[str, Any]]:
        return self._json("_reward_profiling.jsonl")

    @property
    def agent_metrics(self) -> Any:
        return self._json("_agent_metrics.json")

    @property
    def repeat_level_metrics(self) -> Any:
        return self._json("_repeat_level_metrics.json")

    @property
    def completion_summary(self) -> Any:
        return self._json("_completion_summary.json")

    def write(self, out_dir: PathLike) -> List[str]:
        """Writes every file (the command's bytes and names) into ``out_dir``."""
        return self._write_all(out_dir)

    def __repr__(self) -> str:
        return f"<rollstat.Profile: {', '.join(self._names)}>"


class Report(Files):
    """The self-contained HTML report; shown inline in a notebook."""

    @property
    def html(self) -> str:
        return self._read(self._names[0]).decode("utf-8")

    def write(self, path: PathLike) -> str:
        """Writes the page (the command's bytes) to ``path``; returns the path."""
        return self._write_one(self._names[0], os.fspath(path))

    def _repr_html_(self) -> str:
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" '
                'style="width:100%;height:720px;border:0" sandbox="allow-scripts"></iframe>')

    def __repr__(self) -> str:
        return f"<rollstat.Report: {len(self.html)} characters of HTML>"


class EvalComparison(Files):
    """NeMo Gym's ``gym eval compare`` report: ``markdown`` and ``data`` (the JSON)."""

    @property
    def markdown(self) -> Optional[str]:
        name = next((n for n in self._names if n.endswith(".md")), None)
        return self._read(name).decode("utf-8") if name else None

    @property
    def data(self) -> Any:
        return self._json(".json")

    def write(self, out_dir: PathLike) -> List[str]:
        """Writes the report files (the command's bytes and names) into ``out_dir``."""
        return self._write_all(out_dir)

    def _repr_markdown_(self) -> Optional[str]:
        return self.markdown

    def __repr__(self) -> str:
        return f"<rollstat.EvalComparison: {', '.join(self._names)}>"


class Tables:
    """The four level tables of ``export``: ``rollouts``, ``tasks``, ``agents`` and
    ``repeats`` (also by name, ``t["tasks"]``), with the warnings the command prints."""

    names = ("rollouts", "tasks", "agents", "repeats")

    def __init__(self, tables: Mapping[str, Table], warnings: List[str]) -> None:
        self._tables = dict(tables)
        self.warnings = warnings

    def __getitem__(self, name: str) -> Table:
        return self._tables[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tables)

    @property
    def rollouts(self) -> Table:
        return self._tables["rollouts"]

    @property
    def tasks(self) -> Table:
        return self._tables["tasks"]

    @property
    def agents(self) -> Table:
        return self._tables["agents"]

    @property
    def repeats(self) -> Table:
        return self._tables["repeats"]

    def __repr__(self) -> str:
        return "<rollstat.Tables: " + ", ".join(f"{n} ({len(t)} rows)" for n, t in self._tables.items()) + ">"

# ---------------------------------------------------------------------------------------
# The commands: each builds the configuration its command builds from flags and runs the
# same workflow in the engine.


def _issue(warns: Sequence[str]) -> None:
    """Issues a call's warnings (each distinct one once) as :class:`RollstatWarning`,
    attributed to the caller of the public function."""
    for w in warns:
        _warnings.warn(w, RollstatWarning, stacklevel=3)


def _spelled(name: str, args: Sequence[Any], kwargs: Mapping[str, Any], defaults: Mapping[str, Any]) -> str:
    """The call ``rollstat.name(...)`` as the user made it: the positional arguments, then
    each keyword argument whose value is not its default (paths as text)."""
    def text(v: Any) -> str:
        if isinstance(v, os.PathLike):
            v = os.fspath(v)
        elif isinstance(v, (list, tuple)):
            v = type(v)(os.fspath(x) if isinstance(x, os.PathLike) else x for x in v)
        return repr(v)
    parts = [text(a) for a in args]
    parts += [f"{k}={text(v)}" for k, v in kwargs.items() if v != defaults[k]]
    return f"rollstat.{name}({', '.join(parts)})"


def _names(written: Sequence[str]) -> List[str]:
    return sorted(os.path.basename(w) for w in written)


def _metric_args(metrics: Any, metric_dir: Any, answer_key: Any, subset_key: Any,
                 ddof: Any) -> Tuple[List[str], Optional[str], Optional[str], Optional[str], int]:
    return (_a.texts("metrics", metrics), _a.opt_path("metric_dir", metric_dir),
            _a.opt_text("answer_key", answer_key), _a.opt_text("subset_key", subset_key), _a.count("ddof", ddof))


def profile(rollouts: Paths, inputs: PathLike, *, allow_partial: bool = False, metrics: Iterable[str] = (),
            metric_dir: Optional[PathLike] = None, answer_key: Optional[str] = None,
            subset_key: Optional[str] = None, ddof: int = 0, out_dir: Optional[PathLike] = None) -> Profile:
    """NeMo Gym's ``gym eval profile`` over a run (``rollstat profile``).

    Args:
        rollouts: the rollouts JSONL (or the files a run was written as).
        inputs: the run's materialized inputs JSONL.
        allow_partial: profile a run that has not collected every expected rollout.
        metrics: extra metrics for agent_metrics: ``"pass_at_k"``, ``"reward_variance"``,
            or SQL metrics by name (from ``metric_dir``).
        answer_key, subset_key, ddof: as the command's ``--answer-key``, ``--subset-key``,
            ``--ddof``.
        out_dir: also leave the files there (else they are only in the result).

    Returns a :class:`Profile`; ``.write(dir)`` writes the command's exact bytes.
    Raises :class:`InputError` on bad input.
    """
    files = _a.paths("rollouts", rollouts)
    inp = _a.path("inputs", inputs)
    args = (files, inp, _a.flag("allow_partial", allow_partial),
            *_metric_args(metrics, metric_dir, answer_key, subset_key, ddof))
    if out_dir is not None:
        d = _a.path("out_dir", out_dir)
        written, warns = _rollstat.profile(*args, d)
        result = Profile(d, _names(written), files + [inp], False)
    else:
        with _private() as d:
            written, warns = _rollstat.profile(*args, d)
            result = Profile(d, _names(written), files + [inp], True)
    _issue(warns)
    return result


_HEALTH_FILES = ["quality_summary.json", "rollout_verdicts.jsonl"]


def aggregate(rollouts: Paths, *, inputs: Optional[PathLike] = None, agent: Optional[str] = None,
              metrics: Iterable[str] = (), metric_dir: Optional[PathLike] = None, answer_key: Optional[str] = None,
              subset_key: Optional[str] = None, ddof: int = 0, key_metrics: Optional[Sequence[str]] = None,
              failures: Paths = (), count_failures_as_zero: Iterable[str] = (), count_missing_as_zero: bool = False,
              merge_into: Optional[PathLike] = None, health_check: bool = True, ignore_checks: Iterable[str] = (),
              out: Optional[PathLike] = None) -> Aggregate:
    """NeMo Gym's ``gym eval aggregate`` for a run (``rollstat aggregate``): the
    ``_aggregate_metrics.json``, what the score covers, and the rollout health check.

    Args:
        rollouts: the rollouts JSONL, or every shard a run was written as (failures
            sidecars and materialized inputs among them are recognised and skipped).
        inputs: materialized inputs, to label rollouts by agent and server.
        agent: the label of rollouts that name no agent.
        metrics, metric_dir, answer_key, subset_key, ddof: extra metrics, as ``profile``.
        key_metrics: key-metric patterns (default: every ``mean/*`` plus coverage).
        failures: each shard's failures sidecar, in order (default: ``S_failures.jsonl``
            beside each ``S.jsonl``, when it exists).
        count_failures_as_zero: failure classes whose failures are scored as zero rows.
        count_missing_as_zero: score rollouts the materialized inputs owe that left no
            row at all as zeros.
        merge_into: also write every record, in (task, rollout) order, into this file.
        health_check: run the rollout health check (its reports go beside ``out``).
        ignore_checks: health checks to skip.
        out: also leave the file there (else it is only in the result).

    Returns an :class:`Aggregate`: ``.metrics`` is the file's content, ``.key_metrics``
    each run's key metrics, ``.coverage`` what the score covers, ``.health`` the health
    check's summary, ``.write(path)`` the command's exact bytes.
    """
    files = _a.paths("rollouts", rollouts)
    inp = _a.opt_path("inputs", inputs)
    side = _a.paths("failures", failures, required=False)
    check = _a.flag("health_check", health_check)
    ignore = _a.texts("ignore_checks", ignore_checks)
    if ignore and not check:
        raise _a.bad_value("ignore_checks", "checks are skipped within the health check; health_check=False "
                                            "skips it whole")
    args = (files, inp, _a.opt_text("agent", agent), *_metric_args(metrics, metric_dir, answer_key, subset_key, ddof),
            [] if key_metrics is None else _a.texts("key_metrics", key_metrics), side,
            _a.texts("count_failures_as_zero", count_failures_as_zero),
            _a.flag("count_missing_as_zero", count_missing_as_zero), _a.opt_path("merge_into", merge_into), check,
            ignore)
    protected = files + ([inp] if inp else []) + side
    if out is not None:
        target = os.path.abspath(_a.path("out", out))
        folder, owned = os.path.dirname(target), False
        file, reports, coverage, warns = _rollstat.aggregate(*args, target)
    else:
        with _private() as folder:
            file, reports, coverage, warns = _rollstat.aggregate(
                *args, os.path.join(folder, "rollouts_aggregate_metrics.json"))
        owned = True
    wrote = ([file] if file else []) + reports
    names = [os.path.basename(p) for p in wrote if os.path.dirname(os.path.abspath(p)) == folder]
    result = Aggregate(folder, names, protected, owned, coverage)
    _issue(warns)
    return result


class Health(Files):
    """The rollout health check's reports: ``summary`` is ``quality_summary.json`` (per
    check how many records it judged, the verdicts, every finding, per task its
    repeats' verdicts), ``verdicts`` one dict per record, ``counts`` the verdict counts;
    ``write(out_dir)`` writes both files."""

    @property
    def summary(self) -> Dict[str, Any]:
        return self._json("quality_summary.json")

    @property
    def verdicts(self) -> List[Dict[str, Any]]:
        return self._json("rollout_verdicts.jsonl")

    @property
    def counts(self) -> Dict[str, int]:
        v = self.summary["run"]["verdicts"]
        return {"checked": sum(v.values()), **v}

    def write(self, out_dir: PathLike) -> List[str]:
        """Writes both reports (the command's bytes and names) into ``out_dir``."""
        return self._write_all(out_dir)

    def __repr__(self) -> str:
        c = self.counts
        return (f"<rollstat.Health: {c['checked']} checked, {c['healthy']} healthy, {c['unhealthy']} unhealthy, "
                f"{c['unobserved']} unobserved>")


def health(rollouts: Paths, *, ignore_checks: Iterable[str] = (), out_dir: Optional[PathLike] = None) -> Health:
    """The rollout health check alone (``rollstat health``): fourteen checks over the
    records and their ``ng_trajectory`` evidence, as NeMo Gym runs them.

    Args:
        rollouts: the rollouts files, read in order as one run.
        ignore_checks: checks to skip (they count as ignored).
        out_dir: also leave the reports there (else they are only in the result).
    """
    files = _a.paths("rollouts", rollouts)
    ignore = _a.texts("ignore_checks", ignore_checks)
    if out_dir is not None:
        d = os.path.abspath(_a.path("out_dir", out_dir))
        written, warns = _rollstat.health(files, ignore, d)
        result = Health(d, [os.path.basename(w) for w in written], files, False)
    else:
        with _private() as d:
            written, warns = _rollstat.health(files, ignore, d)
            result = Health(d, [os.path.basename(w) for w in written], files, True)
    _issue(warns)
    return result


@overload
def export(rollouts: Paths, out_dir: PathLike, *, inputs: Optional[PathLike] = None,
           agent: Optional[str] = None) -> List[str]: ...


@overload
def export(rollouts: Paths, out_dir: None = None, *, inputs: Optional[PathLike] = None, agent: Optional[str] = None,
           lake: PathLike, sweep_id: Optional[str] = None, labels: Optional[Mapping[str, Any]] = None) -> str: ...


def export(rollouts: Paths, out_dir: Optional[PathLike] = None, *, inputs: Optional[PathLike] = None,
           agent: Optional[str] = None, lake: Optional[PathLike] = None, sweep_id: Optional[str] = None,
           labels: Optional[Mapping[str, Any]] = None) -> Union[List[str], str]:
    """Writes the rollouts, tasks, agents and repeats tables as Parquet into ``out_dir``
    (``rollstat export``); returns the files written. :func:`tables` gives the same
    tables in memory.

    With ``lake=DIR`` instead, adds the run as one sweep to a lake of sweeps
    (``rollstat export --lake``) and returns the sweep's id: ``sweep_id`` names it
    (default: derived from the files' contents, so the same files replace their sweep),
    ``labels`` (``{"step": 4000, "model": "m1"}``) become columns of every query over
    the lake. :func:`query` with ``lake=`` and :func:`report` with ``lake=`` read it."""
    files = _a.paths("rollouts", rollouts)
    inp = _a.opt_path("inputs", inputs)
    name = _a.opt_text("agent", agent)
    if lake is not None:
        if out_dir is not None:
            raise _a.bad_value("out_dir", "give out_dir or lake, not both")
        if labels is not None and not isinstance(labels, Mapping):
            raise TypeError(f"labels: expected a dict of label to value, got {type(labels).__name__}")
        pairs = [f"{_a.text('labels', k)}={v}" for k, v in (labels or {}).items()]
        sweep, _, warns = _rollstat.to_lake(files, _a.path("lake", lake), inp, name,
                                            _a.opt_text("sweep_id", sweep_id), pairs)
        _issue(warns)
        return sweep
    if sweep_id is not None or labels is not None:
        raise _a.bad_value("sweep_id" if sweep_id is not None else "labels", "goes with lake=")
    if out_dir is None:
        raise _a.bad_value("out_dir", "give out_dir (a folder for the four tables) or lake")
    written, warns = _rollstat.export(files, _a.path("out_dir", out_dir), inp, name)
    _issue(warns)
    return written


def tables(rollouts: Paths, *, inputs: Optional[PathLike] = None, agent: Optional[str] = None) -> Tables:
    """The four tables of ``export`` in memory: rollouts, tasks, agents, repeats. Each is
    a :class:`Table` that polars, pyarrow, pandas and DuckDB read without a copy. The
    command's warnings are issued as :class:`RollstatWarning`."""
    named, warns = _rollstat.tables(_a.paths("rollouts", rollouts), _a.opt_path("inputs", inputs),
                                    _a.opt_text("agent", agent))
    _issue(warns)
    return Tables({n: Table(t, n) for n, t in named}, list(warns))


def read_rollouts(rollouts: Paths, *, inputs: Optional[PathLike] = None, agent: Optional[str] = None) -> Table:
    """The typed rollouts table of a run (one row per rollout, one column per field;
    what ``rollstat ingest`` writes), in memory."""
    t, warns = _rollstat.read_rollouts(_a.paths("rollouts", rollouts), _a.opt_path("inputs", inputs),
                                       _a.opt_text("agent", agent))
    _issue(warns)
    return Table(t, "rollouts")


def read_parquet(path: PathLike) -> Table:
    """A Parquet file (a table rollstat wrote, say) as a :class:`Table`."""
    p = _a.path("path", path)
    return Table(_rollstat.read_parquet(p), os.path.basename(p))


def compare(rollouts: Paths, *, inputs: Paths = (), agent: Optional[str] = None, field: str = "reward",
            pass_at: Optional[int] = None, baseline: Optional[str] = None, cluster_key: Optional[str] = None,
            by: Optional[str] = None, mde: bool = False, detect: Optional[float] = None,
            allow_task_mismatch: bool = False, pair_by: str = "index", task_key: Optional[str] = None) -> Table:
    """Runs against a baseline (``rollstat compare``): per run, the paired difference
    from the baseline over the tasks both measured, its interval and p-value, clustered
    standard errors, power. Returns the comparison as a :class:`Table` (the columns of
    ``compare --format parquet``; the task lists of ``--flips`` do not fit one table: use
    the command with ``--format json`` for them).

    Runs are paired only where they hold the same task (each index's fingerprint, a hash
    of its user messages, must agree): runs on different questions raise
    :class:`InputError`. ``pair_by="fingerprint"`` pairs a shuffled dataset by content;
    ``task_key="question_id"`` by an identity field of yours;
    ``allow_task_mismatch=True`` pairs by index regardless, as NeMo Gym does."""
    t, warns = _rollstat.compare(
        _a.paths("rollouts", rollouts), _a.paths("inputs", inputs, required=False), _a.opt_text("agent", agent),
        _a.text("field", field), _a.opt_count("pass_at", pass_at, 1), _a.opt_text("baseline", baseline),
        _a.opt_text("cluster_key", cluster_key), _a.opt_text("by", by), _a.flag("mde", mde),
        _a.opt_number("detect", detect), _a.flag("allow_task_mismatch", allow_task_mismatch),
        _a.by_fingerprint(pair_by), _a.opt_text("task_key", task_key))
    _issue(warns)
    return Table(t, "comparison")


class Gate:
    """The decision of :func:`gate`: the command's JSON as attributes.

    ``verdict`` is ``"PASS"``, ``"FAIL"`` or ``"INCONCLUSIVE"``; ``checks`` one dict per
    check and candidate (and group), with ``name``, ``metric``, ``kind``, ``verdict``,
    ``estimate``, ``ci_low``, ``ci_high``, ``p``, ``p_adjusted``, ``tasks``,
    ``tasks_needed``, ``se``, ``candidate``, ``group`` and ``required``; ``baseline``,
    ``alpha`` and ``ci_level`` (the level of the intervals, 1 − 2·alpha).
    ``exit_status`` is the command's (0, 3 or 4)."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self.data = data
        self.verdict: str = data["verdict"]
        self.checks: List[Dict[str, Any]] = data["checks"]
        self.baseline: str = data["baseline"]
        self.alpha: float = data["alpha"]
        self.ci_level: float = data["ci_level"]

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"

    @property
    def exit_status(self) -> int:
        return {"PASS": 0, "FAIL": 3}.get(self.verdict, 4)

    def __repr__(self) -> str:
        counts: Dict[str, int] = {}
        for c in self.checks:
            counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
        said = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
        return f"<rollstat.Gate {self.verdict}: {said} against {self.baseline}>"


def gate(policy: PathLike, rollouts: Paths, *, inputs: Paths = (), agent: Optional[str] = None,
         baseline: Optional[str] = None, cluster_key: Optional[str] = None, allow_task_mismatch: bool = False,
         pair_by: str = "index", task_key: Optional[str] = None) -> Gate:
    """A release decision (``rollstat gate``): the checks of the TOML file ``policy``
    tested on every run of ``rollouts`` against the baseline (the first run unless
    ``baseline`` names one), the runs read as :func:`compare` reads them. Returns a
    :class:`Gate`; a policy or input problem raises :class:`InputError` naming the file,
    line and key. Warnings are issued as :class:`RollstatWarning`."""
    text, warns = _rollstat.gate(
        _a.path("policy", policy), _a.paths("rollouts", rollouts), _a.paths("inputs", inputs, required=False),
        _a.opt_text("agent", agent), _a.opt_text("baseline", baseline), _a.opt_text("cluster_key", cluster_key),
        _a.flag("allow_task_mismatch", allow_task_mismatch), _a.by_fingerprint(pair_by),
        _a.opt_text("task_key", task_key))
    _issue(warns)
    return Gate(json.loads(text))


def query(sql: str, rollouts: Optional[Paths] = None, *, inputs: Optional[PathLike] = None,
          agent: Optional[str] = None, parquet_dir: Optional[PathLike] = None,
          lake: Optional[PathLike] = None) -> Table:
    """SQL over the ``rollouts``, ``tasks``, ``agents`` and ``repeats`` tables of a run
    (``rollstat query``): ``sql`` is a query, a ``.sql`` file, or a bundled query's name.
    The tables come from ``rollouts`` (and ``inputs``), from ``parquet_dir`` (an
    ``export`` folder), or from ``lake`` (every sweep of a lake, with ``sweep``,
    ``sweep_order`` and the labels as columns, and a ``sweeps`` table)."""
    files = _a.paths("rollouts", rollouts, required=False)
    given = [n for n, v in (("rollouts", files or None), ("parquet_dir", parquet_dir), ("lake", lake))
             if v is not None]
    if len(given) > 1:
        raise _a.bad_value(given[1], f"give one of rollouts, parquet_dir and lake (got {' and '.join(given)})")
    t, warns = _rollstat.query(_a.text("sql", sql), files, _a.opt_path("inputs", inputs), _a.opt_text("agent", agent),
                               _a.opt_path("parquet_dir", parquet_dir), _a.opt_path("lake", lake))
    _issue(warns)
    return Table(t, "query")


def select(rollouts: Optional[Paths] = None, inputs: Optional[PathLike] = None, out: Optional[PathLike] = None, *,
           run: Optional[str] = None, agent: Optional[str] = None, where: Optional[str] = None,
           band: Optional[Tuple[float, float]] = None, drop_zero_variance: bool = False,
           per: Optional[str] = None, max: Optional[int] = None, sample: Optional[Union[int, float]] = None,
           weight: Optional[str] = None, seed: Optional[int] = None, strip_ng: bool = False,
           lake: Optional[PathLike] = None, sweep: Optional[str] = None) -> Table:
    """The next training set (``rollstat select``): writes each selected task's first
    line in ``inputs`` to ``out`` byte for byte (``strip_ng=True``: without its ``_ng_*``
    keys; ``.gz``/``.zst`` compress), with ``out.manifest.json`` beside it, and returns
    the selected rows of the ``tasks`` table (with the dataset's fields) as a
    :class:`Table`. ``where`` and ``weight`` are SQL over that table, ``band=(lo, hi)``
    keeps tasks whose ``mean/reward`` is inside it, ``per``/``max`` is a quota per value
    of a column, ``sample`` a count (int) or share (float) drawn by ``weight`` with
    ``seed``; ``run`` names the run when the rollouts hold several.

    ``lake=DIR`` makes the lake's ``tasks`` table ``lake_tasks`` in ``where`` and
    ``weight``; with ``sweep=ID`` as well, the rollouts and inputs are the files that
    sweep of the lake was computed from (refused when one is missing or changed), given
    in place of ``rollouts`` and ``inputs``: ``rollstat.select(out="next.jsonl",
    lake="lake", sweep="step-4000", band=(0.2, 0.8))``."""
    quota = (_a.opt_text("per", per), _a.opt_count("max", max))
    if (quota[0] is None) != (quota[1] is None):
        raise _a.bad_value("per" if quota[0] is None else "max", "per and max go together (a quota per value)")
    if out is None:
        raise _a.bad_value("out", "give the output file (the manifest is written beside it)")
    name = _a.opt_text("sweep", sweep)
    files: List[str] = []
    inp: Optional[str] = None
    if name is not None:
        given = [n for n, v in (("rollouts", rollouts), ("inputs", inputs)) if v is not None]
        if given:
            raise _a.bad_value(given[0], "the sweep's recorded files are what is read; give rollouts and inputs "
                                         "or sweep, not both")
    else:
        files = _a.paths("rollouts", rollouts)
        if inputs is None:
            raise _a.bad_value("inputs", "give the materialized inputs (or lake= and sweep=)")
        inp = _a.path("inputs", inputs)
    t, _, warns = _rollstat.select(
        files, inp, _a.path("out", out), _a.opt_text("run", run),
        _a.opt_text("agent", agent), _a.opt_text("where", where), _a.band(band),
        _a.flag("drop_zero_variance", drop_zero_variance), *quota, _a.sample(sample), _a.opt_text("weight", weight),
        _a.opt_count("seed", seed), _a.flag("strip_ng", strip_ng), _a.opt_path("lake", lake), name)
    _issue(warns)
    return Table(t, "tasks")


def report(rollouts: Optional[Paths] = None, *, inputs: Paths = (), agent: Optional[str] = None,
           metric: str = "reward", baseline: Optional[str] = None, cluster_key: Optional[str] = None,
           allow_task_mismatch: bool = False, pair_by: str = "index", task_key: Optional[str] = None,
           out: Optional[PathLike] = None, lake: Optional[PathLike] = None, by: Optional[str] = None) -> Report:
    """The one-page HTML report of a sweep (``rollstat report``): leaderboard,
    comparisons against the baseline, pass@k, difficulty, noise, cost. Shown inline in a
    notebook; ``.write(path)`` writes the command's bytes.

    With ``lake=DIR`` (and no rollouts), the trend page over a lake of sweeps: each
    run's metric per sweep, and the paired change between consecutive sweeps (ordered
    by the label ``by``, e.g. ``"step"``), marked where it is beyond noise."""
    field = _a.text("metric", metric)
    target = None if out is None else os.path.abspath(_a.path("out", out))
    if lake is not None:
        given = [n for n, v in (("rollouts", rollouts), ("inputs", inputs or None), ("agent", agent),
                                ("baseline", baseline), ("cluster_key", cluster_key), ("task_key", task_key),
                                ("allow_task_mismatch", allow_task_mismatch or None),
                                ("pair_by", None if pair_by == "index" else pair_by)) if v is not None]
        if given:
            raise _a.bad_value(given[0], f"not used with lake= (the trend over a lake's sweeps): {', '.join(given)}")
        trend = (_a.path("lake", lake), _a.opt_text("by", by), field)
        name, protected = "trend.html", []

        def run(to: str) -> List[str]:
            return _rollstat.trend(*trend, to)
    else:
        if by is not None:
            raise _a.bad_value("by", "orders a lake's sweeps: it goes with lake=")
        files = _a.paths("rollouts", rollouts)
        inp = _a.paths("inputs", inputs, required=False)
        page = (files, inp, _a.opt_text("agent", agent), field, _a.opt_text("baseline", baseline),
                _a.opt_text("cluster_key", cluster_key), _a.flag("allow_task_mismatch", allow_task_mismatch),
                _a.by_fingerprint(pair_by), _a.opt_text("task_key", task_key))
        name, protected = "report.html", files + inp

        def run(to: str) -> List[str]:
            return _rollstat.report(*page, to)
    if target is not None:
        warns = run(target)
        result = Report(os.path.dirname(target), [os.path.basename(target)], protected, False)
    else:
        with _private() as d:
            warns = run(os.path.join(d, name))
            result = Report(d, [name], protected, True)
    _issue(warns)
    return result


def eval_compare(baseline: PathLike, candidates: Paths, *, baseline_agg_metrics: Optional[PathLike] = None,
                 candidates_agg_metrics: Optional[Paths] = None, agent: Optional[str] = None,
                 baseline_agent: Optional[str] = None, candidate_agents: Optional[Sequence[str]] = None,
                 report_format: str = "both", compute_missing: bool = False,
                 allow_task_mismatch: bool = False, pair_by: str = "index", task_key: Optional[str] = None,
                 output_dir: Optional[PathLike] = None) -> EvalComparison:
    """NeMo Gym's ``gym eval compare`` (``rollstat eval-compare``): a baseline run
    against candidates, from their aggregate metrics files (found beside the rollouts).
    ``report_format`` is ``"md"``, ``"json"`` or ``"both"``. Runs whose rollouts hold
    different tasks under the same index raise :class:`InputError`;
    ``allow_task_mismatch=True`` pairs them by index as NeMo Gym does;
    ``pair_by="fingerprint"`` joins a shuffled run's tasks by what they ask."""
    base = _a.path("baseline", baseline)
    cands = _a.paths("candidates", candidates)
    keywords = dict(baseline_agg_metrics=baseline_agg_metrics, candidates_agg_metrics=candidates_agg_metrics,
                    agent=agent, baseline_agent=baseline_agent, candidate_agents=candidate_agents,
                    report_format=report_format, compute_missing=compute_missing,
                    allow_task_mismatch=allow_task_mismatch, pair_by=pair_by, task_key=task_key,
                    output_dir=output_dir)
    defaults = {k: p.default for k, p in inspect.signature(eval_compare).parameters.items()}
    shown = _spelled("eval_compare", [baseline, candidates], keywords, defaults)
    args = (base, cands, _a.opt_path("baseline_agg_metrics", baseline_agg_metrics),
            None if candidates_agg_metrics is None else _a.paths("candidates_agg_metrics", candidates_agg_metrics),
            _a.opt_text("agent", agent), _a.opt_text("baseline_agent", baseline_agent),
            None if candidate_agents is None else _a.texts("candidate_agents", candidate_agents),
            _a.choice("report_format", report_format, ("md", "json", "both")),
            _a.flag("compute_missing", compute_missing), _a.flag("allow_task_mismatch", allow_task_mismatch),
            _a.by_fingerprint(pair_by), _a.opt_text("task_key", task_key))
    protected = [base, *cands]
    if output_dir is not None:
        d = _a.path("output_dir", output_dir)
        written, warns = _rollstat.eval_compare(*args, d, shown)
        result = EvalComparison(d, _names(written), protected, False)
    else:
        with _private() as d:
            written, warns = _rollstat.eval_compare(*args, d, shown)
            result = EvalComparison(d, _names(written), protected, True)
    _issue(warns)
    return result


def batch_metrics(batch: Any, *, metrics: Iterable[str] = (), metric_dir: Optional[PathLike] = None,
                  group_key: str = "group_idx", prefix: str = "custom_metrics/train",
                  ddof: int = 0) -> Dict[str, Any]:
    """VAGEN's custom metrics for one training batch, as the flat ``{prefix}/{name}``
    dict VAGEN logs to W&B (``rollstat batch-metrics`` on a batch in memory).

    ``batch`` is any of:
      - Arrow data: an object with ``__arrow_c_stream__`` or ``__arrow_c_array__`` (a
        polars or pandas-through-pyarrow frame, a pyarrow table or record batch);
      - a dict of columns: lists or numpy arrays (numeric arrays are read through the
        buffer protocol, one value at a time never becomes a Python object);
      - a list of dicts, one per sample.
    Each sample's group id is its ``group_key`` field, else its ``uid``; samples are
    grouped by the id's ``str()``, as VAGEN does (``1`` and ``"1"`` are one group; ``1``,
    ``1.0`` and ``True`` three). Its score is the sum of ``token_level_scores`` (a 2-D
    array, or one list per sample), else its ``reward``.

    ``metrics``: ``reward_variance``, ``mean_reward``, ``pass_at_k`` (the default: all
    three) or SQL metrics from ``metric_dir``. NaN stays NaN here (the command writes
    null). Warnings are issued as :class:`RollstatWarning`.
    """
    names = _a.texts("metrics", metrics)
    md = _a.opt_path("metric_dir", metric_dir)
    key = _a.text("group_key", group_key)
    options = (key, names, md, _a.text("prefix", prefix), _a.count("ddof", ddof))
    if hasattr(batch, "__arrow_c_stream__") or hasattr(batch, "__arrow_c_array__"):
        flat, warns = _rollstat.batch_metrics(batch, None, False, *options)
    else:
        groups, scores, tokens = _columns(batch, key)
        flat, warns = _rollstat.batch_metrics(groups, scores, tokens, *options)
    _issue(warns)
    return dict(flat)


def _columns(batch: Any, group_key: str) -> Tuple[Any, Any, bool]:
    """The group ids and scores of a dict of columns or a list of row dicts."""
    if isinstance(batch, Mapping):
        if group_key in batch:
            groups = batch[group_key]
        elif "uid" in batch:
            groups = batch["uid"]
        else:
            raise InputError(f"<batch>: no `{group_key}` or `uid` column; expected a group id", None, None, group_key)
        if "token_level_scores" in batch:
            return groups, batch["token_level_scores"], True
        if "reward" in batch:
            return groups, batch["reward"], False
        raise InputError("<batch>: expected a `token_level_scores` or `reward` column", None, None, None)
    if isinstance(batch, (list, tuple)):
        ids: List[Any] = []
        scores: List[Any] = []
        for i, row in enumerate(batch, 1):
            if not isinstance(row, Mapping):
                raise InputError(f"<batch>, row {i}: expected a dict", None, i, None)
            if group_key in row:
                ids.append(row[group_key])
            elif "uid" in row:
                ids.append(row["uid"])
            else:
                raise InputError(f"<batch>, row {i}, key `{group_key}`: no `{group_key}` or `uid`; expected a group id",
                                 None, i, group_key)
            # Each row its own: a list of token scores, else a plain reward (a number).
            if "token_level_scores" in row:
                scores.append(row["token_level_scores"])
            elif "reward" in row:
                reward = row["reward"]
                if not isinstance(reward, numbers.Real):
                    raise InputError(f"<batch>, row {i}, key `reward`: expected a number, got "
                                     f"{type(reward).__name__}", None, i, "reward")
                scores.append(reward)
            else:
                raise InputError(f"<batch>, row {i}: expected `token_level_scores` or `reward`", None, i, None)
        return ids, scores, True
    raise InputError(f"<batch>: expected Arrow data, a dict of columns or a list of dicts, "
                     f"got {type(batch).__name__}", None, None, None)


class Viewer:
    """A running ``rollstat view``: open :attr:`url` in a browser (in a notebook the
    viewer shows itself in a frame), and :meth:`stop` it when done (also on leaving a
    ``with`` block)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @property
    def url(self) -> str:
        """The page's address (with ``?token=…`` when bound to a non-loopback host)."""
        return str(self._inner.url)

    @property
    def running(self) -> bool:
        return bool(self._inner.running)

    def stop(self) -> None:
        """Stops the server; stopping twice does nothing."""
        self._inner.stop()

    def __enter__(self) -> "Viewer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Viewer({self.url!r}, running={self.running})"

    def _repr_html_(self) -> str:
        src = html.escape(self.url, quote=True)
        return f'<iframe src="{src}" width="100%" height="720" style="border:1px solid #ddd"></iframe>'


def view(rollouts: Paths = (), *, inputs: Paths = (), agent: Optional[str] = None, baseline: Optional[str] = None,
         allow_task_mismatch: bool = False, health_check: bool = True, lake: Optional[PathLike] = None,
         sweeps: Sequence[str] = (), host: str = "127.0.0.1", port: Optional[int] = 0) -> Viewer:
    """Serves the rollouts viewer (``rollstat view``) on a background thread: each run's
    score, its tasks by how often they were solved, every rollout's transcript. The runs
    are read as :func:`compare` reads them (several files are several runs, a fan-out
    file one run per agent). ``port=0`` takes any free port, ``None`` the first free one
    from 8765. ``health_check=False`` leaves out the rollout health check. ``lake=DIR``
    serves sweeps of a lake instead of files (``sweeps``: their ids, the first the
    baseline; default its last two), each read from the files the lake recorded.
    Returns a :class:`Viewer` with its ``url``."""
    if not isinstance(host, str):
        raise TypeError(f"host: expected an IP address as str, got {type(host).__name__}")
    if port is not None and (not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535):
        raise TypeError(f"port: expected an int from 0 to 65535 or None, got {port!r}")
    if not isinstance(allow_task_mismatch, bool):
        raise TypeError(f"allow_task_mismatch: expected a bool, got {type(allow_task_mismatch).__name__}")
    lake_dir = _a.opt_path("lake", lake)
    if lake_dir is not None and (rollouts or inputs):
        raise _a.bad_value("lake", "serves the lake's sweeps from their recorded files; give rollouts or lake, not both")
    inner, warns = _rollstat.view(_a.paths("rollouts", rollouts, required=lake_dir is None),
                                  _a.paths("inputs", inputs, required=False),
                                  _a.opt_text("agent", agent), _a.opt_text("baseline", baseline),
                                  allow_task_mismatch, _a.flag("health_check", health_check), lake_dir,
                                  _a.texts("sweeps", sweeps), host, port)
    viewer = Viewer(inner)
    _issue(warns)
    return viewer
