"""Every error type, and Ctrl-C: bad input is an InputError with its place; rollstat's
own failures (and panics) are RollstatError; KeyboardInterrupt leaves nothing behind."""

import glob
import os
import signal
import tempfile
import threading
import time

import pytest

import rollstat
from rollstat import _rollstat

from conftest import run, skip_without


def test_bad_line_names_file_line_and_key(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": 1}\n'
                   '{"_ng_task_index": 1, "_ng_rollout_index": 0, "reward": }\n')
    with pytest.raises(rollstat.InputError) as e:
        rollstat.aggregate(bad, agent="a", out=tmp_path / "out.json")
    err = e.value
    assert isinstance(err, ValueError) and isinstance(err, rollstat.RollstatError)
    assert err.path == str(bad) and err.line == 2
    assert str(err).startswith(f"{bad}, line 2")
    # The same one-line message as the command's.
    p = run("aggregate", bad, "--agent", "a", "--out", tmp_path / "cli.json", check=False)
    assert p.returncode == 2 and p.stderr.strip() == f"rollstat: error: {err}"
    assert not (tmp_path / "out.json").exists()


def test_key_is_named(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_ng_task_index": "x", "_ng_rollout_index": 0, "reward": 1}\n')
    with pytest.raises(rollstat.InputError) as e:
        rollstat.aggregate(bad, agent="a")
    assert e.value.key == "_ng_task_index" and e.value.line == 1


def test_missing_file_and_bad_arguments(tmp_path):
    with pytest.raises(rollstat.InputError) as e:
        rollstat.aggregate(tmp_path / "nope.jsonl")
    assert e.value.path == str(tmp_path / "nope.jsonl")
    with pytest.raises(rollstat.InputError) as e:
        rollstat.compare([tmp_path / "a.jsonl"], pass_at=0)
    assert "pass_at" in str(e.value)


def test_an_input_is_never_overwritten(sweep):
    rollouts, inputs = sweep
    before = os.path.getsize(rollouts)
    with pytest.raises(rollstat.InputError):
        rollstat.aggregate(rollouts, inputs=inputs, out=rollouts)
    got = rollstat.aggregate(rollouts, inputs=inputs)
    with pytest.raises(rollstat.InputError):
        got.write(inputs)
    assert os.path.getsize(rollouts) == before


def test_own_failure_is_rollstat_error(sweep):
    rollouts, inputs = sweep
    if not os.path.exists("/dev/full"):
        skip_without("/dev/full")
    with pytest.raises(rollstat.RollstatError) as e:
        rollstat.aggregate(rollouts, inputs=inputs, out="/dev/full")
    assert not isinstance(e.value, rollstat.InputError)


def test_a_panic_is_rollstat_error():
    with pytest.raises(rollstat.RollstatError) as e:
        _rollstat._panic_for_tests()
    assert "internal error" in str(e.value)
    assert not isinstance(e.value, rollstat.InputError)


def leftovers(*dirs):
    out = []
    for d in dirs:
        out += [p for p in glob.glob(os.path.join(d, "*")) + glob.glob(os.path.join(d, ".*"))
                if "rollstat" in os.path.basename(p) or os.path.basename(p).startswith(".")]
    return out


def test_ctrl_c_stops_a_call_and_leaves_nothing(tmp_path_factory):
    big = tmp_path_factory.mktemp("big")
    run("generate", "-q", "--tasks", 60000, "--repeats", 4, "--agents", 2, "--text-bytes", 400, "--seed", 1,
        "--out-dir", big)
    rollouts, inputs = big / "rollouts.jsonl", big / "materialized_inputs.jsonl"
    before_tmp = set(os.listdir(tempfile.gettempdir()))
    before_big = set(os.listdir(big))
    out_dir = big / "tables"
    timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        rollstat.export(rollouts, out_dir, inputs=inputs)
    took = time.monotonic() - t0
    timer.join()
    assert not out_dir.exists(), os.listdir(out_dir)
    assert set(os.listdir(big)) == before_big
    new_tmp = set(os.listdir(tempfile.gettempdir())) - before_tmp
    assert not [n for n in new_tmp if n.startswith("rollstat-")], new_tmp
    # The same for a result kept in memory: its private folder is gone.
    timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        rollstat.profile(rollouts, inputs, allow_partial=True)
    timer.join()
    new_tmp = set(os.listdir(tempfile.gettempdir())) - before_tmp
    assert not [n for n in new_tmp if n.startswith("rollstat-")], new_tmp
    # And the engine still works afterwards.
    assert rollstat.aggregate(rollouts, inputs=inputs).metrics
    assert took < 60


def test_runs_on_different_questions_are_refused(tmp_path):
    for seed in (1, 2):
        run("generate", "-q", "--tasks", 30, "--repeats", 2, "--agents", 1, "--seed", seed, "--out-dir", tmp_path / f"r{seed}")
    files = [tmp_path / "r1" / "rollouts.jsonl", tmp_path / "r2" / "rollouts.jsonl"]
    with pytest.raises(rollstat.InputError) as e:
        rollstat.compare(files)
    assert "hold different tasks under the same index" in str(e.value)
    t = rollstat.compare(files, allow_task_mismatch=True)
    assert t.to_pylist()[1]["paired_tasks"] == 30
