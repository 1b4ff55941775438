"""The API's results are the command's bytes, and its tables the export's tables."""

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import rollstat

from conftest import need, read, run


def test_aggregate_is_the_commands_bytes(sweep, tmp_path):
    rollouts, inputs = sweep
    want = tmp_path / "want.json"
    run("aggregate", rollouts, "--inputs", inputs, "--out", want, "--metric", "pass_at_k", "--metric",
        "reward_variance", "--ddof", "1")
    got = rollstat.aggregate(rollouts, inputs=inputs, metrics=["pass_at_k", "reward_variance"], ddof=1)
    assert got.names == ["rollouts_aggregate_metrics.json", "quality_summary.json", "rollout_verdicts.jsonl"]
    assert got.files["rollouts_aggregate_metrics.json"] == read(want)
    # The health check's reports: the command's, beside its output.
    for name in ("quality_summary.json", "rollout_verdicts.jsonl"):
        assert got.files[name] == read(tmp_path / name)
    assert got.health["run"]["artifacts"]["records"] == len(got.verdicts)
    assert got.metrics == json.loads(read(want))
    assert set(got.key_metrics) == {e["agent_ref"]["name"] for e in got.metrics}
    written = got.write(tmp_path / "again.json")
    assert read(written) == read(want)
    # out= leaves the file where the command would, with the same bytes.
    out = tmp_path / "out.json"
    assert rollstat.aggregate(rollouts, inputs=inputs, metrics=["pass_at_k", "reward_variance"], ddof=1,
                              out=out).files[out.name] == read(want)
    assert "<table>" in got._repr_html_()


def test_profile_is_the_commands_bytes(sweep, tmp_path):
    rollouts, inputs = sweep
    want = tmp_path / "want"
    run("profile", "--rollouts", rollouts, "--inputs", inputs, "--allow-partial", "--out-dir", want)
    got = rollstat.profile(rollouts, inputs, allow_partial=True)
    assert sorted(got.files) == sorted(os.listdir(want))
    for name, data in got.files.items():
        assert data == read(want / name), name
    lines = [json.loads(x) for x in read(want / "rollouts_reward_profiling.jsonl").splitlines()]
    assert got.reward_profile == lines
    assert got.agent_metrics == json.loads(read(want / "rollouts_agent_metrics.json"))
    again = tmp_path / "again"
    for p in got.write(again):
        assert read(p) == read(want / os.path.basename(p))


def test_profile_refuses_a_partial_run_without_allow_partial(sweep, tmp_path):
    rollouts, inputs = sweep
    with pytest.raises(rollstat.InputError) as e:
        rollstat.profile(rollouts, inputs, out_dir=tmp_path / "strict")
    assert "allow_partial=True" in str(e.value)
    assert not (tmp_path / "strict").exists()


def test_export_and_tables(sweep, tmp_path):
    rollouts, inputs = sweep
    want = tmp_path / "want"
    run("export", rollouts, "--inputs", inputs, "--out-dir", want)
    files = rollstat.export(rollouts, tmp_path / "got", inputs=inputs)
    for f in files:
        assert read(f) == read(want / os.path.basename(f)), f
    t = rollstat.tables(rollouts, inputs=inputs)
    assert list(t) == ["rollouts", "tasks", "agents", "repeats"]
    for name in t:
        ours = pa.table(t[name])
        theirs = pq.read_table(want / f"{name}.parquet")
        assert ours.column_names == theirs.column_names, name
        assert ours.num_rows == theirs.num_rows == len(t[name])
        # The same values; strings travel as string views in memory, large strings on disk.
        assert ours.cast(theirs.schema).equals(theirs), name
    assert rollstat.read_rollouts(rollouts, inputs=inputs).to_arrow().equals(pa.table(t.rollouts))


def test_compare_is_the_commands_table(runs, tmp_path):
    want = tmp_path / "want.parquet"
    run("compare", *runs, "--mde", "--format", "parquet", "--out", want)
    got = rollstat.compare(runs, mde=True)
    theirs = pq.read_table(want)
    ours = pa.table(got)
    assert ours.cast(theirs.schema).equals(theirs)
    rows = got.to_pylist()
    assert len(rows) == got.num_rows >= 1
    assert "<table>" in got._repr_html_()


def test_query_report_and_eval_compare(sweep, runs, tmp_path):
    rollouts, inputs = sweep
    q = rollstat.query("select agent, count(*) as n from rollouts group by agent order by agent", rollouts,
                       inputs=inputs)
    want = tmp_path / "q.parquet"
    run("query", "select agent, count(*) as n from rollouts group by agent order by agent", "--rollouts", rollouts,
        "--inputs", inputs, "--format", "parquet", "--out", want)
    assert pa.table(q).cast(pq.read_schema(want)).equals(pq.read_table(want))
    assert sum(r["n"] for r in q.to_pylist()) == sum(1 for _ in open(rollouts))

    rep = rollstat.report(rollouts, inputs=[inputs])
    assert rep.html.startswith("<!DOCTYPE html>") or rep.html.lstrip().lower().startswith("<!doctype html>")
    assert "<iframe" in rep._repr_html_()

    ec = rollstat.eval_compare(runs[0], [runs[1]], compute_missing=True, report_format="json")
    assert list(ec.files) == ["compare_report.json"]
    assert isinstance(ec.data, dict)


def test_select_writes_the_commands_lines_and_returns_the_tasks_rows(sweep, tmp_path):
    rollouts, inputs = sweep
    got = tmp_path / "py.jsonl"
    t = rollstat.select(rollouts, inputs, got, run="math_with_judge_simple_agent", band=(0.25, 0.75),
                        per="subset", max=5, sample=10, seed=3, strip_ng=True)
    want = tmp_path / "cli.jsonl"
    run("select", "--rollouts", rollouts, "--inputs", inputs, "--run", "math_with_judge_simple_agent",
        "--band", "0.25..0.75", "--per", "subset", "--max", 5, "--sample", 10, "--seed", 3, "--strip-ng",
        "--out", want)
    assert read(got) == read(want)
    assert t.num_rows == len(read(want).splitlines()) > 0
    assert json.loads(read(str(got) + ".manifest.json"))["counts"]["selected"] == t.num_rows


def test_tables_go_to_polars_and_duckdb_without_pyarrow_in_between(sweep):
    pl = need("polars")
    duckdb = need("duckdb")
    rollouts, inputs = sweep
    t = rollstat.tables(rollouts, inputs=inputs)
    tasks = t.tasks
    df = pl.DataFrame(tasks)
    assert df.columns == tasks.columns and df.height == tasks.num_rows
    assert df.schema == pl.DataFrame(t.tasks.to_arrow()).schema
    n = duckdb.sql("select count(*) from tasks").fetchall()[0][0]
    assert n == tasks.num_rows
    per_agent = duckdb.sql("select agent, count(*) as n from tasks group by agent order by agent").fetchall()
    assert [r[0] for r in per_agent] == sorted(set(df["agent"].to_list()))
    pdf = tasks.to_pandas()
    assert list(pdf.columns) == tasks.columns and len(pdf) == tasks.num_rows
