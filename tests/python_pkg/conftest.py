"""Fixtures of the Python package's suite. It tests the wheel installed in the running
Python, never the source tree: `rollstat` must import from site-packages.

ROLLSTAT_BIN names the `rollstat` binary built by cargo, whose bytes the API must
give (default: the `rollstat` command installed with the wheel). The conformance corpus
is read from ROLLSTAT_SHARED (default: ../shared beside the checkout).
ROLLSTAT_REQUIRE_SHARED=1 (set by .ci/run) says this machine has every package and file
CI has: a test that would skip for want of one fails instead."""

import importlib
import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))


def binary():
    b = os.environ.get("ROLLSTAT_BIN")
    if b:
        return b
    beside = os.path.join(os.path.dirname(sys.executable), "rollstat")
    return beside if os.path.exists(beside) else shutil.which("rollstat")


def shared():
    s = os.environ.get("ROLLSTAT_SHARED") or os.path.join(REPO, "..", "shared")
    return os.path.abspath(s)


def conformance():
    """The corpus folder; a missing corpus fails the suite rather than passing it."""
    c = os.path.join(shared(), "conformance")
    if not os.path.isdir(c):
        pytest.fail(f"the conformance corpus is missing: {c} (set ROLLSTAT_SHARED)")
    return c


def skip_without(what):
    """Skips the test, as `what` is missing here; fails it under ROLLSTAT_REQUIRE_SHARED=1."""
    if os.environ.get("ROLLSTAT_REQUIRE_SHARED") == "1":
        pytest.fail(f"{what} is missing, and ROLLSTAT_REQUIRE_SHARED=1 says this machine has it")
    pytest.skip(f"{what} is missing")


def need(module):
    """The module `module`, imported; without it the test is skipped (see `skip_without`)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        skip_without(f"the Python package {module}")


def run(*args, check=True):
    p = subprocess.run([binary(), *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"rollstat {' '.join(map(str, args))}: exit {p.returncode}\n{p.stderr}")
    return p


def read(p):
    with open(p, "rb") as f:
        return f.read()


@pytest.fixture(scope="session")
def sweep(tmp_path_factory):
    """A generated sweep: 3 agents fanned out over 120 tasks x 4 repeats, some rollouts
    masked and some rewards missing."""
    d = tmp_path_factory.mktemp("sweep")
    run("generate", "-q", "--tasks", 120, "--repeats", 4, "--agents", 3, "--fan-out", "--seed", 7,
        "--masked-frac", 0.03, "--missing-frac", 0.02, "--out-dir", d)
    return d / "rollouts.jsonl", d / "materialized_inputs.jsonl"


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    """Two runs of one agent each over the same 80 tasks x 4 repeats (one task seed, two
    outcome seeds), as separate files."""
    d = tmp_path_factory.mktemp("runs")
    out = []
    for seed in (3, 4):
        run("generate", "-q", "--tasks", 80, "--repeats", 4, "--agents", 1, "--seed", seed, "--task-seed", 1,
            "--out-dir", d / f"r{seed}")
        out.append(d / f"r{seed}" / "rollouts.jsonl")
    return out
