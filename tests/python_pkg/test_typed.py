"""The Python functions take typed arguments: a wrong type is a TypeError naming the
parameter, a bad value an InputError naming it; errors speak the Python parameters and
carry their place; warnings go through `warnings`, never to stderr."""

import warnings
from typing import Any, List

import pytest

import rollstat

from conftest import run

# Wrong on purpose: typed as Any so that the type checker lets the calls through.
YES: Any = "yes"
NO: Any = "no"
FIVE: Any = 5
NOTHING: Any = None


def test_a_wrong_type_is_a_type_error_naming_the_parameter(runs, sweep):
    rollouts, inputs = sweep
    with pytest.raises(TypeError, match=r"^mde: expected True or False, got str"):
        rollstat.compare(runs, mde=YES)
    with pytest.raises(TypeError, match=r"^health_check: expected True or False, got str"):
        rollstat.aggregate(rollouts, inputs=inputs, health_check=NO)
    with pytest.raises(TypeError, match=r"^rollouts: expected a path or a list of paths, got None"):
        rollstat.aggregate(NOTHING)
    with pytest.raises(TypeError, match=r"^field: expected a str, got int"):
        rollstat.compare(runs, field=FIVE)
    with pytest.raises(TypeError, match=r"^ddof: expected an int, got str"):
        rollstat.profile(rollouts, inputs, ddof=YES)


def test_a_bad_value_is_an_input_error_naming_the_parameter(runs):
    with pytest.raises(rollstat.InputError, match=r"^pass_at: expected at least 1, got 0") as e:
        rollstat.compare(runs, pass_at=0)
    assert e.value.key == "pass_at"
    with pytest.raises(rollstat.InputError, match=r"^pair_by: expected one of 'index', 'fingerprint'"):
        rollstat.compare(runs, pair_by="content")
    with pytest.raises(rollstat.InputError, match=r"^rollouts: give at least one file"):
        rollstat.compare([])


def test_a_rollout_with_no_agent_is_placed_and_named_in_python_terms(tmp_path):
    bad = tmp_path / "noagent.jsonl"
    bad.write_text('{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1}\n'
                   '{"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": 0}\n')
    with pytest.raises(rollstat.InputError) as e:
        rollstat.aggregate(bad, out=tmp_path / "out.json")
    err = e.value
    assert err.path == str(bad) and err.line == 1
    assert str(err).startswith(f"{bad}, line 1: this rollout names no agent")
    assert 'pass agent="NAME" to label such rollouts' in str(err) and "--" not in str(err)
    # The command says the same with its flags.
    p = run("aggregate", bad, "--out", tmp_path / "cli.json", check=False)
    assert p.returncode == 2
    assert p.stderr.strip() == "rollstat: error: " + str(err).replace('agent="NAME"', "--agent NAME").replace(
        "no inputs=", "no --inputs")


def test_a_partial_run_is_refused_in_python_terms(sweep, tmp_path):
    rollouts, inputs = sweep
    with pytest.raises(rollstat.InputError) as e:
        rollstat.profile(rollouts, inputs, out_dir=tmp_path / "strict")
    assert "Use allow_partial=True to profile completed rollouts" in str(e.value)
    p = run("profile", "--rollouts", rollouts, "--inputs", inputs, "--out-dir", tmp_path / "cli", check=False)
    assert "Use --allow-partial to profile completed rollouts" in p.stderr


def test_a_value_the_run_does_not_have_is_named_as_given(runs, sweep, tmp_path):
    with pytest.raises(rollstat.InputError) as e:
        rollstat.compare(runs, baseline="nope")
    assert str(e.value).startswith('baseline="nope" is not a run here; runs: ')
    p = run("compare", *runs, "--baseline", "nope", check=False)
    assert p.stderr.strip() == "rollstat: error: " + str(e.value).replace('baseline="nope"', '--baseline "nope"')
    rollouts, inputs = sweep
    with pytest.raises(rollstat.InputError) as e:
        rollstat.select(rollouts, inputs, tmp_path / "sel.jsonl")
    assert str(e.value).endswith('name the one whose tasks are selected with run="NAME"')
    with pytest.raises(rollstat.InputError) as e:
        rollstat.select(rollouts, inputs, tmp_path / "sel.jsonl", run="nope")
    assert str(e.value).startswith('run="nope": no such run in the rollouts')


def test_options_that_do_not_fit_are_named_in_python_terms(runs):
    with pytest.raises(rollstat.InputError, match=r"^detect=0: give a non-zero difference"):
        rollstat.compare(runs, detect=0.0)
    with pytest.raises(rollstat.InputError, match=r"^by= and cluster_key= name the same field"):
        rollstat.compare(runs, by="subset", cluster_key="subset")
    with pytest.raises(rollstat.InputError, match=r"^give inputs= once per rollouts= file, in the same order"):
        rollstat.compare(runs, inputs=[runs[0]])
    p = run("compare", *runs, "--inputs", runs[0], check=False)
    assert "give --inputs once per --rollouts file, in the same order" in p.stderr


def test_inputs_given_as_rollouts_are_named_in_python_terms(sweep, tmp_path):
    rollouts, inputs = sweep
    with pytest.raises(rollstat.InputError) as e:
        rollstat.aggregate(rollouts, inputs=rollouts, out=tmp_path / "a.json")
    assert "were inputs= and rollouts= swapped? (inputs= takes" in str(e.value)
    assert e.value.path == str(rollouts) and e.value.line == 1
    p = run("aggregate", rollouts, "--inputs", rollouts, "--out", tmp_path / "b.json", check=False)
    assert "were --inputs and --rollouts swapped? (--inputs takes" in p.stderr


def test_a_bad_reward_is_blamed_on_reward():
    with pytest.raises(rollstat.InputError) as e:
        rollstat.batch_metrics([{"uid": 1, "reward": "x"}])
    assert e.value.key == "reward" and e.value.line == 1
    assert "token_level_scores" not in str(e.value)


def test_warnings_go_through_warnings_once_each_and_never_to_stderr(sweep, tmp_path, capfd):
    rollouts, inputs = sweep
    # A run whose last line was cut off mid-write: a warning said as the file is read.
    cut = tmp_path / "cut.jsonl"
    with open(rollouts, "rb") as f:
        data = f.read()
    cut.write_bytes(data + data.splitlines()[0][:40])
    capfd.readouterr()
    calls = [
        lambda: rollstat.aggregate(cut, inputs=inputs),
        lambda: rollstat.profile(cut, inputs, allow_partial=True),
        lambda: rollstat.export(cut, tmp_path / "tables", inputs=inputs),
        lambda: rollstat.query("select count(*) as n from rollouts", cut, inputs=inputs),
        lambda: rollstat.report(cut, inputs=[inputs]),
        lambda: rollstat.tables(cut, inputs=inputs),
    ]
    for call in calls:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        said = [str(w.message) for w in caught if issubclass(w.category, rollstat.RollstatWarning)]
        assert any("the last line is cut off" in m for m in said), said
        assert len(said) == len(set(said)), said
        assert all(not m.startswith("warning: ") for m in said), said
    out, err = capfd.readouterr()
    assert err == "" and out == ""


def test_a_field_left_out_of_the_table_is_a_warning(tmp_path, capfd):
    f = tmp_path / "clash.jsonl"
    f.write_text('{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1, "run_key": 5}\n')
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t = rollstat.read_rollouts(f, agent="a")
    assert t.num_rows == 1
    said = [str(w.message) for w in caught if issubclass(w.category, rollstat.RollstatWarning)]
    assert said == [f"{f}: field `run_key` has the name of one of the rollouts table's own columns and is left "
                    "out of the table"]
    assert capfd.readouterr().err == ""


def test_select_returns_the_tasks_it_wrote(sweep, tmp_path):
    rollouts, inputs = sweep
    got = tmp_path / "py.jsonl"
    t = rollstat.select(rollouts, inputs, got, run="math_with_judge_simple_agent", sample=0.25, seed=1)
    lines = got.read_bytes().splitlines()
    assert t.num_rows == len(lines) > 0
    with pytest.raises(rollstat.InputError, match=r"^sample: a share is in \(0, 1\]"):
        rollstat.select(rollouts, inputs, got, sample=1.5)
    with pytest.raises(TypeError, match=r"^sample: expected a count"):
        rollstat.select(rollouts, inputs, got, sample=YES)


def test_export_to_a_lake_returns_the_sweep_id(sweep: Any, tmp_path: Any) -> None:
    # Annotated, so that the type checker checks the body: each form's result type.
    rollouts, inputs = sweep
    sid: str = rollstat.export(rollouts, inputs=inputs, lake=tmp_path / "lake", labels={"step": 1})
    files: List[str] = rollstat.export(rollouts, tmp_path / "tables", inputs=inputs)
    assert isinstance(sid, str) and sid
    assert sorted(map(str, files)) == sorted(str(tmp_path / "tables" / f"{n}.parquet")
                                             for n in ("rollouts", "tasks", "agents", "repeats"))
