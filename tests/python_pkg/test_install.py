"""The installed wheel: the package, its native module and its `rollstat` command."""

import json
import os
import subprocess
import sys
import sysconfig

import rollstat

from conftest import read, run


def test_imports_the_installed_wheel_not_the_source_tree():
    site = os.path.realpath(sysconfig.get_paths()["purelib"])
    assert os.path.realpath(rollstat.__file__).startswith(site), rollstat.__file__
    assert os.path.realpath(rollstat._rollstat.__file__).startswith(site)
    assert rollstat.__version__.count(".") == 2


def test_console_script_is_the_command(sweep, tmp_path):
    rollouts, inputs = sweep
    exe = os.path.join(os.path.dirname(sys.executable), "rollstat")
    assert os.access(exe, os.X_OK)
    v = subprocess.run([exe, "--version"], stdout=subprocess.PIPE, text=True, check=True)
    assert v.stdout.startswith("rollstat ")
    ours = tmp_path / "ours.json"
    p = subprocess.run([exe, "aggregate", rollouts, "--inputs", inputs, "--out", ours], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0, p.stderr
    assert "mean/reward" in p.stdout  # the closing report, as the binary prints it
    want = tmp_path / "want.json"
    run("aggregate", rollouts, "--inputs", inputs, "--out", want)
    assert read(ours) == read(want)


def test_eval_compare_records_the_command_that_ran(runs, tmp_path):
    """The report's command is the one the user ran: from the console script, its own
    command line (not the Python interpreter's); from the Python function, the call."""
    base, cand = (str(r) for r in runs)
    rollstat.eval_compare(base, [cand], compute_missing=True, report_format="json")  # the aggregate files
    exe = os.path.join(os.path.dirname(sys.executable), "rollstat")
    out = tmp_path / "by script"
    p = subprocess.run([exe, "eval-compare", "--baseline", base, "--candidates", cand, "--output-dir", out],
                       stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0, p.stderr
    want = f"rollstat eval-compare --baseline {base} --candidates {cand} --output-dir '{out}'"
    assert json.loads(read(out / "compare_report.json"))["command"] == want
    assert f"Command: `{want}`" in read(out / "compare_report.md").decode()
    # From Python, in a script run as `python -c`: the call, as written.
    out = tmp_path / "by call"
    code = f"import rollstat; rollstat.eval_compare({base!r}, [{cand!r}], report_format='json', output_dir={str(out)!r})"
    p = subprocess.run([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
    assert p.returncode == 0, p.stderr
    want = f"rollstat.eval_compare({base!r}, [{cand!r}], report_format='json', output_dir={str(out)!r})"
    assert json.loads(read(out / "compare_report.json"))["command"] == want


def test_console_script_exit_statuses(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "rollstat")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"_ng_task_index": 0, "_ng_rollout_index": 0, "reward": }\n')
    p = subprocess.run([exe, "aggregate", bad, "--agent", "a", "--out", tmp_path / "x.json"],
                       stderr=subprocess.PIPE, text=True)
    assert p.returncode == 2
    assert "bad.jsonl, line 1" in p.stderr and not (tmp_path / "x.json").exists()
    p = subprocess.run([exe, "no-such-command"], stderr=subprocess.PIPE, text=True)
    assert p.returncode == 2
    p = subprocess.run([sys.executable, "-m", "rollstat", "--help"], stdout=subprocess.PIPE, text=True)
    assert p.returncode == 0 and "aggregate" in p.stdout


def test_help_is_useful():
    doc = rollstat.aggregate.__doc__
    assert "aggregate_metrics.json" in doc and "key_metrics" in doc
    for name in rollstat.__all__:
        obj = getattr(rollstat, name)
        if callable(obj) and not name.startswith("_"):
            assert obj.__doc__, f"rollstat.{name} has no docstring"
