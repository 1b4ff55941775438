"""An error that names options names them as the caller wrote them: from Python, by
their parameters (`pass_at=4`, `lake="DIR"`), never by the command's flags; the command
says the same message with its flags. And `select` reads a lake's sweep as
`rollstat select --lake DIR --sweep ID` does."""

import json
import re
import shutil

import pytest

import rollstat

from conftest import read, run

FLAG = re.compile(r"--[a-z][a-z-]*")
RUN = "math_with_judge_simple_agent"


def refused(call, *, flags=()):
    """The message of the InputError `call` raises, checked to name no flag but `flags`
    (flags of other programs it may name)."""
    with pytest.raises(rollstat.InputError) as e:
        call()
    msg = str(e.value)
    assert [f for f in FLAG.findall(msg) if f not in flags] == [], msg
    return msg


def the_command_says(msg, args, spelled):
    """The command run with `args` refuses with `msg`, each Python spelling of `spelled`
    written as its flag."""
    p = run(*args, check=False)
    for python, cli in spelled.items():
        msg = msg.replace(python, cli)
    assert (p.returncode, p.stderr.strip()) == (2, f"rollstat: error: {msg}")


def test_compare_names_its_parameters(runs):
    msg = refused(lambda: rollstat.compare(runs, pass_at=99))
    assert msg == "pass_at=99: no task of any run has 99 measured rollouts (at most 4)"
    the_command_says(msg, ("compare", *runs, "--pass-at", 99), {"pass_at=99": "--pass-at 99"})

    msg = refused(lambda: rollstat.compare(runs, allow_task_mismatch=True, task_key="id"))
    assert msg == ('allow_task_mismatch=True (by index), pair_by="fingerprint" (by content) and task_key= (by a '
                   "field) are three ways to pair tasks: give one")
    the_command_says(msg, ("compare", *runs, "--allow-task-mismatch", "--task-key", "id"),
                     {"allow_task_mismatch=True": "--allow-task-mismatch",
                      'pair_by="fingerprint"': "--pair-by fingerprint", "task_key=": "--task-key"})

    with pytest.raises(rollstat.InputError) as e:
        rollstat.compare(runs, cluster_key="nope")
    assert str(e.value) == f"{runs[0]}, key `nope`: no rollout has this field (cluster_key=)"
    assert (e.value.path, e.value.key) == (str(runs[0]), "nope")


def test_aggregate_and_profile_name_their_parameters(sweep, tmp_path):
    rollouts, inputs = sweep
    msg = refused(lambda: rollstat.aggregate(rollouts, inputs=inputs, failures=[rollouts, inputs]))
    assert msg == "failures= is given 2 time(s) for 1 shard(s); give one sidecar per shard, in order"
    the_command_says(msg, ("aggregate", rollouts, "--inputs", inputs, "--failures", rollouts, "--failures", inputs,
                           "--out", tmp_path / "a.json"), {"failures=": "--failures"})

    msg = refused(lambda: rollstat.aggregate(rollouts, inputs=inputs, metrics=["nope"]))
    assert msg.startswith('metrics="nope": no such metric; known: ')
    the_command_says(msg, ("aggregate", rollouts, "--inputs", inputs, "--metric", "nope", "--out",
                           tmp_path / "a.json"), {'metrics="nope"': "--metric nope"})

    taken = tmp_path / "a file"
    taken.write_text("")
    msg = refused(lambda: rollstat.profile(rollouts, inputs, allow_partial=True, out_dir=taken))
    assert msg == f"{taken}: is not a folder; out_dir= takes a folder"
    the_command_says(msg, ("profile", "--rollouts", rollouts, "--inputs", inputs, "--allow-partial", "--out-dir",
                           taken), {"out_dir=": "--out-dir"})


def test_export_query_and_report_name_their_parameters(sweep, tmp_path):
    rollouts, inputs = sweep
    lake = tmp_path / "lake"
    msg = refused(lambda: rollstat.export(rollouts, inputs=inputs, lake=lake, sweep_id="no way"))
    assert msg.startswith('sweep_id="no way": use letters, digits')
    the_command_says(msg, ("export", "--rollouts", rollouts, "--inputs", inputs, "--lake", lake, "--sweep-id",
                           "no way"), {'sweep_id="no way"': '--sweep-id "no way"'})

    msg = refused(lambda: rollstat.export(rollouts, inputs=inputs, lake=lake, labels={"1st": 2}))
    assert msg.startswith('labels="1st=2": the key is a column name')
    the_command_says(msg, ("export", "--rollouts", rollouts, "--inputs", inputs, "--lake", lake, "--label", "1st=2"),
                     {'labels="1st=2"': '--label "1st=2"'})

    msg = refused(lambda: rollstat.query("sweep_flips", rollouts, inputs=inputs))
    assert msg == 'sweep_flips is a query over a lake of sweeps: give lake="DIR"'
    the_command_says(msg, ("query", "sweep_flips", "--rollouts", rollouts, "--inputs", inputs),
                     {'lake="DIR"': "--lake DIR"})

    msg = refused(lambda: rollstat.query("select 1", lake=lake))
    assert msg == f'lake="{lake}": no such folder (add a sweep with `rollstat.export(..., lake=DIR)`)'
    the_command_says(msg, ("query", "select 1", "--lake", lake),
                     {f'lake="{lake}"': f"--lake {lake}",
                      "`rollstat.export(..., lake=DIR)`": "`rollstat export --lake DIR`"})

    msg = refused(lambda: rollstat.query("select 1", parquet_dir=tmp_path))
    assert msg == f"{tmp_path}: no rollouts/tasks/agents/repeats.parquet here (write them with `rollstat.export`)"
    the_command_says(msg, ("query", "select 1", "--parquet-dir", tmp_path),
                     {"`rollstat.export`": "`rollstat export`"})

    rollstat.export(rollouts, inputs=inputs, lake=lake, sweep_id="s1", labels={"step": 1})
    msg = refused(lambda: rollstat.report(lake=lake, by="epoch"))
    assert msg == 'by="epoch": no sweep in the lake has that label'


def test_select_names_its_parameters(sweep, tmp_path):
    rollouts, inputs = sweep
    out = tmp_path / "sel.jsonl"
    msg = refused(lambda: rollstat.select(rollouts, inputs, out, run=RUN, per="nope", max=1))
    assert msg == "per=\"nope\": no such column in the tasks table or the dataset's fields"
    the_command_says(msg, ("select", "--rollouts", rollouts, "--inputs", inputs, "--out", out, "--run", RUN,
                           "--per", "nope", "--max", 1), {'per="nope"': "--per nope"})

    msg = refused(lambda: rollstat.select(rollouts, inputs, out, run=RUN, weight="0 - 1"))
    assert re.fullmatch(r'weight="0 - 1": task \d+ has weight -1; weights must be finite and not negative', msg), msg
    the_command_says(msg, ("select", "--rollouts", rollouts, "--inputs", inputs, "--out", out, "--run", RUN,
                           "--weight", "0 - 1"), {'weight="0 - 1"': "--weight 0 - 1"})


def test_eval_compare_and_gate_name_their_parameters(runs, tmp_path):
    # Copies: no aggregate metrics beside them, whatever other tests wrote beside the runs.
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    shutil.copy(runs[0], a)
    shutil.copy(runs[1], b)
    # `--disable-aggregation` is NeMo Gym's flag (of `gym eval run`), not rollstat's.
    msg = refused(lambda: rollstat.eval_compare(a, [b]), flags=("--disable-aggregation",))
    assert msg.endswith(f'run `rollstat.aggregate("{a}")` first, pass compute_missing=True to compute it now, or '
                        "point at the metrics file directly with baseline_agg_metrics= / candidates_agg_metrics=.")
    the_command_says(msg, ("eval-compare", "--baseline", a, "--candidates", b, "--output-dir", tmp_path / "ec"),
                     {f'`rollstat.aggregate("{a}")`': f"`rollstat aggregate --rollouts {a}`",
                      "compute_missing=True": "--compute-missing", "baseline_agg_metrics=": "--baseline-agg-metrics",
                      "candidates_agg_metrics=": "--candidates-agg-metrics"})

    msg = refused(lambda: rollstat.eval_compare(a, [b], candidate_agents=["x", "y"]))
    assert msg.startswith("candidate_agents= has 2 entries but 1 candidate run(s) were given.")

    taken = tmp_path / "a file"
    taken.write_text("")
    msg = refused(lambda: rollstat.eval_compare(a, [b], compute_missing=True, output_dir=taken))
    assert msg == f"{taken}: is not a folder; output_dir= takes a folder"
    the_command_says(msg, ("eval-compare", "--baseline", a, "--candidates", b, "--compute-missing", "--output-dir",
                           taken), {"output_dir=": "--output-dir"})

    policy = tmp_path / "gate.toml"
    policy.write_text('[[check]]\nname = "wide"\nmetric = "pass@99"\nkind = "threshold"\nmin = 0.5\n')
    with pytest.raises(rollstat.InputError) as e:
        rollstat.gate(policy, runs)
    msg = str(e.value)
    assert msg == f'{policy}, line 3, key `metric`: check "wide": pass_at=99: no task of any run has 99 measured ' \
                  "rollouts (at most 4)"
    assert (e.value.line, e.value.key) == (3, "metric")
    the_command_says(msg, ("gate", "--policy", policy, *runs), {"pass_at=99": "--pass-at 99"})

    msg = refused(lambda: rollstat.gate(policy, [runs[0]]))
    assert msg.endswith(": give another rollouts= file, or a file with several agents")
    the_command_says(msg, ("gate", "--policy", policy, runs[0]), {"rollouts=": "--rollouts"})

    policy.write_text("[[check]]\nmetric = \n")
    msg = refused(lambda: rollstat.gate(policy, runs))
    assert msg.startswith(f"{policy}, line 2")
    assert msg.endswith('(see `help(rollstat.gate)` and docs/compare.md, "Gates")')
    the_command_says(msg, ("gate", "--policy", policy, *runs), {"`help(rollstat.gate)`": "`rollstat gate --help`"})


def test_select_from_a_lake_sweep_is_the_commands_selection(sweep, tmp_path):
    rollouts, inputs = sweep
    lake = tmp_path / "lake"
    sid = rollstat.export(rollouts, inputs=inputs, lake=lake, sweep_id="s1")
    got, want, direct = tmp_path / "py.jsonl", tmp_path / "cli.jsonl", tmp_path / "direct.jsonl"
    t = rollstat.select(out=got, lake=lake, sweep=sid, run=RUN, band=(0.25, 0.75), sample=10, seed=3)
    run("select", "--lake", lake, "--sweep", sid, "--run", RUN, "--band", "0.25..0.75", "--sample", 10, "--seed", 3,
        "--out", want)
    assert read(got) == read(want)
    assert t.num_rows == len(read(got).splitlines()) > 0
    manifests = [json.loads(read(f"{p}.manifest.json")) for p in (got, want)]
    for m in manifests:
        assert m["flags"].pop("out")
    assert manifests[0] == manifests[1]
    assert (manifests[0]["flags"]["lake"], manifests[0]["flags"]["sweep"]) == (str(lake), sid)
    # The sweep's files are the run's own: the same selection as from them.
    rollstat.select(rollouts, inputs, direct, run=RUN, band=(0.25, 0.75), sample=10, seed=3)
    assert read(direct) == read(got)


def test_select_from_a_lake_sweep_is_refused_as_the_command_refuses_it(sweep, tmp_path):
    rollouts, inputs = sweep
    lake = tmp_path / "lake"
    sid = rollstat.export(rollouts, inputs=inputs, lake=lake, sweep_id="s1")
    out = tmp_path / "sel.jsonl"
    msg = refused(lambda: rollstat.select(out=out, lake=lake, sweep="s2", run=RUN))
    assert msg == f'sweep="s2": no such sweep in the lake {lake}; its sweeps are: {sid}'
    the_command_says(msg, ("select", "--lake", lake, "--sweep", "s2", "--run", RUN, "--out", out),
                     {'sweep="s2"': "--sweep s2"})
    msg = refused(lambda: rollstat.select(out=out, sweep=sid, run=RUN))
    assert msg == 'sweep="s1": give the lake with lake="DIR"'
    with pytest.raises(rollstat.InputError, match=r"^rollouts: the sweep's recorded files are what is read"):
        rollstat.select(rollouts, out=out, lake=lake, sweep=sid)
    with pytest.raises(rollstat.InputError, match=r"^inputs: give the materialized inputs \(or lake= and sweep=\)"):
        rollstat.select(rollouts, out=out)
    with pytest.raises(rollstat.InputError, match=r"^out: give the output file"):
        rollstat.select(rollouts, inputs)
    assert not out.exists()
