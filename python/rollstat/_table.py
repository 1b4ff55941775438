"""`Table`: a result table that any Arrow consumer takes without a copy.

A table implements the Arrow PyCapsule stream interface (``__arrow_c_stream__``), so
``polars.DataFrame(t)``, ``pyarrow.table(t)`` and ``duckdb.sql("select * from t")`` read
its columns where they are; rollstat depends on none of them. Strings travel as Arrow
string views, Polars' own layout.
"""

from __future__ import annotations

import html
from typing import Any, Dict, List, Optional, Tuple


class Table:
    """A table of results (rollouts, tasks, agents, repeats, a comparison, a query)."""

    __slots__ = ("_t", "name")

    def __init__(self, native: Any, name: str = "") -> None:
        self._t = native
        self.name = name

    def __arrow_c_stream__(self, requested_schema: Optional[object] = None) -> object:
        """The Arrow C stream of the table's record batches (a PyCapsule)."""
        return self._t.__arrow_c_stream__(requested_schema)

    @property
    def num_rows(self) -> int:
        return self._t.num_rows

    def __len__(self) -> int:
        return self._t.num_rows

    @property
    def columns(self) -> List[str]:
        """The column names, in order."""
        return self._t.column_names

    @property
    def dtypes(self) -> List[Tuple[str, str]]:
        """Each column's name and type (Polars' name for it: ``f64``, ``str``, ``i64``…)."""
        return self._t.dtypes

    def to_pylist(self, offset: int = 0, limit: Optional[int] = None) -> List[Dict[str, Any]]:
        """Rows as dicts; for small tables (large ones: ``to_polars()`` or ``to_arrow()``)."""
        return self._t.to_pylist(offset, limit)

    def to_polars(self) -> Any:
        """A ``polars.DataFrame`` over the same memory (needs polars)."""
        import polars as pl

        return pl.DataFrame(self)

    def to_arrow(self) -> Any:
        """A ``pyarrow.Table`` over the same memory (needs pyarrow)."""
        import pyarrow as pa

        return pa.table(self)

    def to_pandas(self) -> Any:
        """A ``pandas.DataFrame`` (through pyarrow; needs pandas and pyarrow)."""
        return self.to_arrow().to_pandas()

    def __repr__(self) -> str:
        label = f" {self.name}" if self.name else ""
        return f"<rollstat.Table{label}: {self.num_rows} rows × {len(self.columns)} columns>\n{self._t.preview(8)}"

    def _repr_html_(self) -> str:
        return _html_table(self.columns, self.to_pylist(0, 20), self.num_rows, self.name)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return html.escape("" if v is None else str(v))


def _html_table(columns: List[str], rows: List[Dict[str, Any]], total: int, caption: str = "") -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_cell(r[c])}</td>" for c in columns) + "</tr>" for r in rows)
    more = f"<p>{len(rows)} of {total} rows</p>" if total > len(rows) else ""
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{more}"
