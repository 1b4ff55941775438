"""rollstat — fast statistics over LLM-eval and RL rollout results.

NeMo Gym's artifacts to the byte (``profile``, ``aggregate`` with its failures and
health check, ``health``, ``eval_compare``), the
rollouts, tasks, agents and repeats tables in memory (``tables``, ``read_rollouts``:
any Arrow consumer — polars, pyarrow, pandas, DuckDB — takes them without a copy), SQL
over them (``query``), paired comparisons (``compare``), release decisions from a
policy of checks (``gate``), the HTML report (``report``), VAGEN's batch metrics
inside a training loop (``batch_metrics``), and the rollouts viewer (``view``). The cluster
drivers are ``rollstat.ray`` and ``rollstat.spark``; the ``rollstat`` command is
installed with the package.

    >>> import rollstat, polars as pl
    >>> t = rollstat.tables("rollouts.jsonl", inputs="materialized_inputs.jsonl")
    >>> pl.DataFrame(t.tasks).sort("mean/reward").head()

Bad input raises :class:`InputError` (a ``ValueError``, with ``path``, ``line`` and
``key``); rollstat's own failures raise :class:`RollstatError`.
"""

from ._api import (
    Aggregate,
    EvalComparison,
    Files,
    Gate,
    Health,
    Profile,
    Report,
    Tables,
    aggregate,
    batch_metrics,
    compare,
    eval_compare,
    export,
    gate,
    health,
    profile,
    query,
    read_parquet,
    read_rollouts,
    report,
    select,
    tables,
    view,
    Viewer,
)
from ._errors import InputError, RollstatError, RollstatWarning
from ._rollstat import __version__
from ._table import Table

__all__ = [
    "Aggregate",
    "EvalComparison",
    "Files",
    "Gate",
    "Health",
    "InputError",
    "Profile",
    "Report",
    "RollstatError",
    "RollstatWarning",
    "Table",
    "Tables",
    "Viewer",
    "__version__",
    "aggregate",
    "batch_metrics",
    "compare",
    "eval_compare",
    "export",
    "gate",
    "health",
    "profile",
    "query",
    "read_parquet",
    "read_rollouts",
    "report",
    "select",
    "tables",
    "view",
]
