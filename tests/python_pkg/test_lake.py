"""A lake of sweeps (`rollstat export --lake DIR`) read by the engines users already have:
DuckDB, pyarrow.dataset and Polars see the sweeps as one table through Hive partitioning,
including a column only the newer sweep has (null for the older one); the numbers match
`rollstat query --lake`; and a column whose type changes is refused before the lake is touched.

The sweep ids look like numbers and the older sweep's files sort first, on purpose: an
engine that infers partition types reads `sweep=1000` as an integer, and one that takes the
schema from the first file misses the newer column. The calls below guard against both."""

import csv
import glob
import hashlib
import io
import json
import os
import re
import shutil

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from conftest import run

TASKS, REPEATS, AGENTS = 60, 4, 2
OLD, NEW, BAD = "1000", "2000", "3000"
ROLLOUTS, TASK_ROWS = TASKS * REPEATS * AGENTS, TASKS * AGENTS


def judge_score(i):
    return round(0.05 + (i % 19) / 20, 2)


def rewrite(path, value):
    """Gives every rollout line of `path` a `judge_score` field of value(i)."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**o, "judge_score": value(i)}) + "\n" for i, o in enumerate(rows)))


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """Two sweeps over the same tasks (one task seed, two outcome seeds), the second one with
    a new numeric field on every rollout. Returns the lake folder and the sweeps' folders."""
    d = tmp_path_factory.mktemp("lake")
    for seed, sid in ((1, OLD), (2, NEW)):
        run("generate", "-q", "--tasks", TASKS, "--repeats", REPEATS, "--agents", AGENTS, "--fan-out",
            "--seed", seed, "--task-seed", 11, "--out-dir", d / sid)
    rewrite(d / NEW / "rollouts.jsonl", judge_score)
    for sid in (OLD, NEW):
        run("export", "-q", "--rollouts", d / sid / "rollouts.jsonl", "--inputs", d / sid / "materialized_inputs.jsonl",
            "--lake", d / "lake", "--sweep-id", sid, "--label", f"step={sid}")
    # The hard case for the engines: the first file of each table is the older sweep's.
    for table in ("rollouts", "tasks", "agents", "repeats", "sweeps"):
        files = sorted(glob.glob(f"{d}/lake/{table}/*/*.parquet"))
        assert files == [f"{d}/lake/{table}/sweep={s}/part-0.parquet" for s in (OLD, NEW)]
    assert "judge_score" not in pq.read_schema(f"{d}/lake/rollouts/sweep={OLD}/part-0.parquet").names
    return d / "lake", d


def by_sweep(pairs):
    """{sweep: (rows, non-null values)} of (sweep, value) pairs."""
    out = {}
    for s, v in pairs:
        n, k = out.get(s, (0, 0))
        out[s] = (n + 1, k + (v is not None))
    return out


EXPECTED = {"rollouts": ("judge_score", {OLD: (ROLLOUTS, 0), NEW: (ROLLOUTS, ROLLOUTS)}),
            "tasks": ("mean/judge_score", {OLD: (TASK_ROWS, 0), NEW: (TASK_ROWS, TASK_ROWS)})}


# The documented read calls, one per engine.

def duck(lake, table):
    return (f"read_parquet('{lake}/{table}/*/*.parquet', hive_partitioning = true, union_by_name = true, "
            f"hive_types = {{'sweep': VARCHAR}})")


def arrow(lake, table):
    part = ds.partitioning(pa.schema([("sweep", pa.string())]), flavor="hive")
    files = ds.dataset(f"{lake}/{table}", format="parquet", partitioning=part)
    schema = pa.unify_schemas([f.physical_schema for f in files.get_fragments()] + [part.schema])
    return ds.dataset(f"{lake}/{table}", format="parquet", partitioning=part, schema=schema).to_table()


def polars(lake, table):
    schema = {}
    for f in sorted(glob.glob(f"{lake}/{table}/sweep=*/*.parquet")):
        schema.update(pl.read_parquet_schema(f))
    return pl.scan_parquet(f"{lake}/{table}/**/*.parquet", hive_partitioning=True, hive_schema={"sweep": pl.String},
                           schema=schema, missing_columns="insert").collect()


def test_duckdb_unions_sweeps_with_nulls_for_the_old_one(lake):
    lake, d = lake
    con = duckdb.connect()
    for table, (column, expected) in EXPECTED.items():
        pairs = con.sql(f'SELECT sweep, "{column}" FROM {duck(lake, table)}').fetchall()
        assert by_sweep(pairs) == expected
        types = con.sql(f'SELECT DISTINCT typeof(sweep), typeof("{column}") FROM {duck(lake, table)}').fetchall()
        assert types == [("VARCHAR", "DOUBLE")]
    # The new column's values are the ones written.
    got = con.sql(f"SELECT judge_score FROM {duck(lake, 'rollouts')} WHERE sweep = '{NEW}'").fetchall()
    assert sorted(v for (v,) in got) == sorted(judge_score(i) for i in range(ROLLOUTS))


def test_duckdb_joins_agents_with_their_sweeps_labels(lake):
    lake, _ = lake
    con = duckdb.connect()
    rows = con.sql(f"""SELECT a.sweep, a.agent, s.step, s.num_rollouts, s.task_set_fingerprint
                       FROM {duck(lake, 'agents')} a JOIN {duck(lake, 'sweeps')} s USING (sweep)
                       ORDER BY a.sweep, a.agent""").fetchall()
    assert len(rows) == 2 * AGENTS and len({r[1] for r in rows}) == AGENTS
    # The `step` label is written as an integer: an integer column, not text.
    assert [(r[0], r[2], r[3]) for r in rows] == [(s, int(s), ROLLOUTS) for s in (OLD, NEW) for _ in range(AGENTS)]
    # One task seed: one task set.
    assert len({r[4] for r in rows}) == 1


def test_pyarrow_dataset_unifies_the_fragments_schemas(lake):
    lake, _ = lake
    for table, (column, expected) in EXPECTED.items():
        t = arrow(lake, table)
        assert t.schema.field("sweep").type == pa.string() and t.schema.field(column).type == pa.float64()
        assert by_sweep(zip(t.column("sweep").to_pylist(), t.column(column).to_pylist())) == expected
    # Every number of the rollouts table is a double, but the `_ng_*` indexes.
    t = arrow(lake, "rollouts")
    ints = {f.name for f in t.schema if pa.types.is_integer(f.type)}
    assert ints == {"_ng_task_index", "_ng_rollout_index"}
    assert {"reward", "difficulty", "num_steps", "question_id"} <= {f.name for f in t.schema if f.type == pa.float64()}


def test_polars_scans_the_lake_with_the_union_schema(lake):
    lake, _ = lake
    for table, (column, expected) in EXPECTED.items():
        df = polars(lake, table)
        assert df.schema["sweep"] == pl.String and df.schema[column] == pl.Float64
        assert by_sweep(df.select("sweep", column).rows()) == expected
    # The engines agree on the agents table, value for value.
    a = polars(lake, "agents").select("sweep", "agent", "mean/reward", "mean/judge_score").sort("sweep", "agent").rows()
    t = arrow(lake, "agents").select(["sweep", "agent", "mean/reward", "mean/judge_score"]).to_pylist()
    assert a == sorted(tuple(r.values()) for r in t)
    assert [r[3] is None for r in a] == [True] * AGENTS + [False] * AGENTS


def test_rollstat_query_gives_duckdbs_numbers(lake):
    lake, _ = lake
    p = run("query", "--lake", lake, "--format", "csv", 'SELECT sweep, agent, "mean/reward" FROM agents')
    ours = list(csv.reader(io.StringIO(p.stdout)))
    assert ours[0] == ["sweep", "agent", "mean/reward"]
    theirs = duckdb.connect().sql(f'SELECT sweep, agent, "mean/reward" FROM {duck(lake, "agents")}').fetchall()
    assert len(theirs) == 2 * AGENTS
    assert sorted(ours[1:]) == sorted([s, a, repr(v)] for s, a, v in theirs)


def listing(d):
    """Every folder and file under `d`, with the files' digests."""
    out = {}
    for root, dirs, files in os.walk(d):
        for x in dirs:
            out[os.path.relpath(os.path.join(root, x), d)] = None
        for x in files:
            with open(os.path.join(root, x), "rb") as f:
                out[os.path.relpath(os.path.join(root, x), d)] = hashlib.sha256(f.read()).hexdigest()
    return out


def test_a_column_changing_type_is_refused_and_the_lake_kept(lake, tmp_path):
    lake, d = lake
    mine = tmp_path / "lake"
    shutil.copytree(lake, mine)
    bad = tmp_path / "bad.jsonl"
    shutil.copy(d / NEW / "rollouts.jsonl", bad)
    rewrite(bad, lambda i: "x")
    before = listing(mine)
    p = run("export", "-q", "--rollouts", bad, "--inputs", d / NEW / "materialized_inputs.jsonl", "--lake", mine,
            "--sweep-id", BAD, "--label", f"step={BAD}", check=False)
    assert p.returncode == 2, p.stderr
    err = p.stderr.strip().splitlines()[-1]
    assert err.startswith("rollstat: error:") and "judge_score" in err
    assert re.search(rf"\b{BAD}\b", err) and re.search(rf"\b{NEW}\b", err), err
    assert listing(mine) == before
    p = run("query", "--lake", mine, "--format", "csv", "SELECT sweep FROM sweeps ORDER BY sweep_order")
    assert p.stdout.split() == ["sweep", OLD, NEW]


def test_the_package_adds_queries_and_draws_a_lake(tmp_path, lake):
    """`export(lake=)` returns the sweep id the command derives, `query(lake=)` gives the
    command's table, `report(lake=)` the command's page."""
    import rollstat

    _, d = lake
    files = [d / OLD / "rollouts.jsonl"]
    inputs = d / OLD / "materialized_inputs.jsonl"
    mine = tmp_path / "mine"
    sid = rollstat.export(files, inputs=inputs, lake=mine, labels={"step": 1000, "model": "m"})
    again = rollstat.export(files, inputs=inputs, lake=mine, labels={"step": 1000, "model": "m"})
    assert sid == again and re.fullmatch(r"s[0-9a-f]{12}", sid)
    assert sorted(os.listdir(mine / "sweeps")) == [f"sweep={sid}"]
    cli = tmp_path / "cli"
    out = run("export", "--rollouts", files[0], "--inputs", inputs, "--lake", cli).stdout
    assert f"Sweep {sid} added to" in out, out
    t = pl.DataFrame(rollstat.query("SELECT sweep, step, model, COUNT(*) AS n FROM rollouts GROUP BY sweep, step, model",
                                    lake=mine))
    assert t.rows() == [(sid, 1000, "m", ROLLOUTS)]  # an int label stays an int
    rollstat.export([d / NEW / "rollouts.jsonl"], inputs=d / NEW / "materialized_inputs.jsonl", lake=mine,
                    labels={"step": 2000})
    page = rollstat.report(lake=mine, by="step")
    html = page.html
    assert html.count('<tr data-run="') == AGENTS and "Holm p" in html
    out = tmp_path / "trend.html"
    run("report", "--lake", mine, "--by", "step", "--out", out, check=True)
    strip = lambda h: re.sub(r"Made by rollstat [^<]*<b>[^<]*</b>", "", h)
    assert strip(html) == strip(out.read_text())
    with pytest.raises(ValueError):
        rollstat.export(files, tmp_path / "t", lake=mine)
    with pytest.raises(rollstat.InputError):
        rollstat.export(files, inputs=inputs, lake=mine, labels={"agent": "x"})
