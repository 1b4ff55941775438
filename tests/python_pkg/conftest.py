"""Fixtures of the Python package's suite. It tests the wheel installed in the running
Python, never the source tree: `rollstat` must import from site-packages.

ROLLSTAT_BIN names the `rollstat` binary built by cargo, whose bytes the API must
give (default: the `rollstat` command installed with the wheel). The conformance corpus
is in tests/fixtures/conformance; the cases on NeMo Gym's own example files, which the
repository does not carry, run from the folder ROLLSTAT_SHARED names (or ../shared beside
the checkout, when present) and are skipped, saying so, without it.
ROLLSTAT_REQUIRE_SHARED=1 (set by .ci/run where that folder is) says this machine has
every package and file CI has: a test that would skip for want of one fails instead."""

import glob
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


FIXTURES = os.path.join(REPO, "tests", "fixtures", "conformance")


def shared_conformance():
    """The `conformance/` folder of NeMo Gym's example files: under ROLLSTAT_SHARED when set
    (which must hold it), else under ../shared beside the checkout when present; else None."""
    given = os.environ.get("ROLLSTAT_SHARED")
    if given:
        c = os.path.join(given, "conformance")
        if not os.path.isdir(c):
            raise RuntimeError(f"ROLLSTAT_SHARED={given}: holds no conformance/ folder")
        return os.path.abspath(c)
    c = os.path.abspath(os.path.join(REPO, "..", "shared", "conformance"))
    return c if os.path.isdir(c) else None


def example_cases(group):
    """The case folders of `group` among the cases on NeMo Gym's example files, sorted;
    none without the folder (`need_examples` then says so)."""
    root = shared_conformance()
    if root is None:
        return []
    return sorted(p for p in glob.glob(os.path.join(root, group, "*")) if os.path.exists(os.path.join(p, "case.json")))


def need_examples(group):
    """Skips the test, saying which cases did not run, without the folder of NeMo Gym's
    example files (see `skip_without`)."""
    if shared_conformance() is None:
        skip_without(f"the folder of NeMo Gym's example files (ROLLSTAT_SHARED=DIR) with the conformance/{group} cases")


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
