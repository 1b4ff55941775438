"""The `rollstat` command of the Python package: the binary's own code, in the wheel's
native module (one copy of the engine, not a second program beside it)."""

import sys

from . import _rollstat


def main() -> int:
    """Runs the command line on ``sys.argv`` and returns its exit status: 0 success, 1
    rollstat's own failure, 2 bad input or usage."""
    return _rollstat.run_cli(["rollstat", *sys.argv[1:]])
