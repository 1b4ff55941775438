"""The cluster drivers (`rollstat.ray`, `rollstat.spark`) take typed keyword arguments,
checked before any scheduler starts; their command lines parse into calls of those
functions; their stages, run here one task after another, give the single-machine
bytes."""

import os
from typing import Any, Dict, List

import pytest

import rollstat
import rollstat.ray
import rollstat.spark
from rollstat import _sweep

from conftest import read, run

# Wrong on purpose: typed as Any so that the type checker lets the calls through.
YES: Any = "yes"
FOUR: Any = "4"
FIVE: Any = 5


@pytest.mark.parametrize("driver", [rollstat.ray, rollstat.spark])
def test_a_wrong_typed_option_is_a_type_error_naming_the_parameter(driver: Any, sweep: Any, tmp_path: Any) -> None:
    rollouts, inputs = sweep
    out = tmp_path / "agg.json"
    with pytest.raises(TypeError, match=r"^ddof: expected an int, got str"):
        driver.aggregate(rollouts, out=out, inputs=inputs, ddof=YES)
    with pytest.raises(TypeError, match=r"^whole_table: expected True or False, got str"):
        driver.aggregate(rollouts, out=out, whole_table=YES)
    with pytest.raises(TypeError, match=r"^key_metrics: expected a str or a list of str, got int"):
        driver.aggregate(rollouts, out=out, key_metrics=FIVE)
    with pytest.raises(TypeError, match=r"^buckets: expected an int, got str"):
        driver.aggregate(rollouts, out=out, buckets=FOUR)
    with pytest.raises(TypeError, match=r"^allow_partial: expected True or False, got str"):
        driver.profile(rollouts, out_dir=tmp_path, inputs=inputs, allow_partial=YES)
    with pytest.raises(rollstat.InputError, match=r"^task_width: expected at least 1, got 0"):
        driver.aggregate(rollouts, out=out, task_width=0)
    assert not out.exists()


def test_the_command_line_parses_into_a_call_of_the_function(monkeypatch: Any) -> None:
    calls: List[Dict[str, Any]] = []
    monkeypatch.setattr(rollstat.ray, "aggregate", lambda rollouts, **kw: calls.append(dict(rollouts=rollouts, **kw)))
    code = rollstat.ray.main(["aggregate", "--rollouts", "a.jsonl", "b.jsonl", "--out", "agg.json", "--metric",
                              "pass_at_k", "--key-metric", "pass@{k}", "--agent", "policy", "--buckets", "3",
                              "--address", "auto", "--whole-table"])
    assert code == 0
    [kw] = calls
    assert kw["rollouts"] == ["a.jsonl", "b.jsonl"] and kw["out"] == "agg.json"
    assert kw["metrics"] == ["pass_at_k"] and kw["key_metrics"] == ["pass@{k}"] and kw["agent"] == "policy"
    assert kw["buckets"] == 3 and kw["address"] == "auto" and kw["whole_table"] is True and kw["ddof"] == 0
    with pytest.raises(SystemExit):
        rollstat.ray.main(["profile", "--rollouts", "a.jsonl", "--out-dir", "p", "--inputs", "i.jsonl", "--agent", "x"])


def _cut(rollouts: Any, folder: Any, parts: int) -> List[str]:
    """The rollouts file cut into `parts` files of consecutive lines."""
    with open(rollouts) as f:
        lines = f.readlines()
    step = -(-len(lines) // parts)
    files = []
    for k in range(parts):
        files.append(str(folder / f"part{k}.jsonl"))
        with open(files[-1], "w") as f:
            f.writelines(lines[k * step:(k + 1) * step])
    return files


def _here(jobs: List[Any]) -> List[Any]:
    """A scheduler of one worker: this process, one task after another."""
    return [_sweep.run_task(t, m, True) for t, m in jobs]


@pytest.mark.parametrize("whole_table", [False, True])
def test_the_stages_give_the_single_machine_bytes(sweep: Any, tmp_path: Any, whole_table: bool) -> None:
    rollouts, inputs = sweep
    files = _cut(rollouts, tmp_path, 3)
    want = tmp_path / "want.json"
    run("aggregate", rollouts, "--inputs", inputs, "--out", want, "-q")
    s = _sweep.sweep(files, out=tmp_path / "got.json", out_name="out", inputs=str(inputs), stats=True)
    options = _sweep.options("aggregate", whole_table=whole_table)
    work = tmp_path / "work"
    os.makedirs(work)
    stages = _sweep.Stages(str(work), files, str(inputs), 25, 40_000)
    stats: List[str] = []
    _sweep.run_stages(s, options, stages, "rollouts.jsonl", _here, "here", stats)
    assert read(tmp_path / "got.json") == read(want)
    assert len(stages.jobs) > 4, "the files and the inputs are sharded by byte range"
    assert ("round" in "".join(stats)) is not whole_table, stats

    want_prof = tmp_path / "want-prof"
    run("profile", "--rollouts", rollouts, "--inputs", inputs, "--out-dir", want_prof, "--allow-partial", "-q")
    s = _sweep.sweep(files, out=tmp_path / "got-prof", out_name="out_dir", inputs=str(inputs))
    options = _sweep.options("profile", allow_partial=True, whole_table=whole_table)
    os.makedirs(tmp_path / "work-prof")
    stages = _sweep.Stages(str(tmp_path / "work-prof"), files, str(inputs), 40, 0)
    _sweep.run_stages(s, options, stages, "rollouts.jsonl", _here, "here", [])
    for name in sorted(os.listdir(want_prof)):
        assert read(tmp_path / "got-prof" / name) == read(want_prof / name), name


def test_a_refused_task_is_bad_input_and_a_failed_one_is_retried(tmp_path: Any) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1}\n{"_ng_task_index": 1, "reward": }\n')
    with pytest.raises(_sweep.BadInput) as e:
        _sweep.run_task(_sweep.Shard(str(bad), str(tmp_path / "s"), 4, None, False))
    err = e.value.error()
    assert isinstance(err, rollstat.InputError) and err.path == str(bad) and err.line == 2
    marker = str(tmp_path / "failed-once")
    with pytest.raises(_sweep.TaskFailed, match="injected failure of join"):
        _sweep.run_task(_sweep.Join((str(bad),), str(tmp_path / "j")), marker)


def test_a_byte_range_that_ends_before_it_starts_is_refused(sweep: Any, tmp_path: Any) -> None:
    rollouts, _ = sweep
    with pytest.raises(_sweep.BadInput, match="ends before it starts"):
        _sweep.run_task(_sweep.Shard(str(rollouts), str(tmp_path / "s"), 4, (10, 5), False))
    assert not (tmp_path / "s").exists()
