"""Failures sidecars, the count-as-zero policies and the health check through the API:
the command's files and numbers."""

import json

import pytest

import rollstat

from conftest import read, run


@pytest.fixture(scope="module")
def failing(tmp_path_factory):
    """A sweep whose failed rollouts are in rollouts_failures.jsonl."""
    d = tmp_path_factory.mktemp("failing")
    run("generate", "-q", "--tasks", 60, "--repeats", 3, "--agents", 2, "--seed", 5, "--failure-frac", 0.1,
        "--missing-frac", 0.03, "--out-dir", d)
    return d


def standing_failures(d):
    """Per (agent, task, rollout) the last sidecar line, unless a result replaced it."""
    def key(r):
        return r["agent_ref"]["name"], r["_ng_task_index"], r["_ng_rollout_index"]
    results = {key(json.loads(ln)) for ln in open(d / "rollouts.jsonl")}
    last = {}
    for ln in open(d / "rollouts_failures.jsonl"):
        r = json.loads(ln)
        last[key(r)] = r["_ng_failure_class"]
    return {k: c for k, c in last.items() if k not in results}


def test_coverage_counts_the_failures_by_class(failing, tmp_path):
    rollouts = failing / "rollouts.jsonl"
    failed = standing_failures(failing)
    got = rollstat.aggregate(rollouts, health_check=False)
    by_class = {}
    for c in failed.values():
        by_class[c] = by_class.get(c, 0) + 1
    records = sum(1 for _ in open(rollouts))
    assert got.coverage["dropped_by_class"] == dict(sorted(by_class.items()))
    assert got.coverage["missing_from_score"] == len(failed)
    assert got.coverage["scored_rollouts"] == records
    assert got.coverage["expected_rollouts"] == records + len(failed)
    assert got.coverage["counted_failure_rows"] is None and got.coverage["health"] is None
    # The numbers the command writes with --coverage-out.
    run("aggregate", rollouts, "--out", tmp_path / "a.json", "--coverage-out", tmp_path / "c.json",
        "--no-health-check")
    assert got.coverage == json.loads(read(tmp_path / "c.json"))
    assert got.names == ["rollouts_aggregate_metrics.json"]


def test_counting_policies_are_the_commands_bytes(failing, tmp_path):
    rollouts, inputs = failing / "rollouts.jsonl", failing / "materialized_inputs.jsonl"
    want = tmp_path / "want.json"
    run("aggregate", rollouts, "--inputs", inputs, "--count-failures-as-zero", "agent_run_error",
        "--count-failures-as-zero", "timeout_exceeded", "--count-missing-as-zero", "--out", want,
        "--no-health-check")
    got = rollstat.aggregate(rollouts, inputs=inputs, count_failures_as_zero=["agent_run_error", "timeout_exceeded"],
                             count_missing_as_zero=True, health_check=False)
    assert got.files["rollouts_aggregate_metrics.json"] == read(want)
    counted = sum(1 for c in standing_failures(failing).values() if c in ("agent_run_error", "timeout_exceeded"))
    assert got.coverage["counted_failure_rows"] == counted
    assert got.coverage["counted_missing_rollouts"] > 0
    c = got.coverage
    assert c["scored_rollouts"] == c["loaded_records"] + counted + c["imputed_zeros"]


def test_health_is_the_commands_and_aggregates(failing, tmp_path):
    rollouts = failing / "rollouts.jsonl"
    run("health", rollouts, "--out-dir", tmp_path / "cli", "--ignore-checks", "agent_turn_hollow")
    h = rollstat.health(rollouts, ignore_checks=["agent_turn_hollow"])
    for name in ("quality_summary.json", "rollout_verdicts.jsonl"):
        assert h.files[name] == read(tmp_path / "cli" / name)
    assert h.summary["run"]["ignored_checks"] == ["agent_turn_hollow"]
    assert h.counts["checked"] == len(h.verdicts) == sum(1 for _ in open(rollouts))
    # aggregate runs the same check and reports the same counts.
    agg = rollstat.aggregate(rollouts, ignore_checks="agent_turn_hollow")
    assert agg.health == h.summary
    assert agg.coverage["health"] == h.counts
    written = h.write(tmp_path / "again")
    assert [read(p) for p in written] == [h.files[n] for n in h.names]


def test_merged_rollouts_and_bad_sidecars(failing, tmp_path):
    rollouts = failing / "rollouts.jsonl"
    merged = tmp_path / "merged.jsonl"
    rollstat.aggregate(rollouts, merge_into=merged, health_check=False)
    rows = [json.loads(ln) for ln in open(merged)]
    keys = [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows]
    assert keys == sorted(keys) and len(rows) == sum(1 for _ in open(rollouts))
    bad = tmp_path / "bad_failures.jsonl"
    bad.write_text('{"_ng_failure_class": "agent_run_error"}\n[1, 2]\n')
    with pytest.raises(rollstat.InputError) as e:
        rollstat.aggregate(rollouts, failures=[bad], out=tmp_path / "out.json")
    assert e.value.path == str(bad) and e.value.line == 2
    assert not (tmp_path / "out.json").exists()
