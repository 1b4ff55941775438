"""The exceptions rollstat raises: one hierarchy, mapped once at the native boundary."""

from __future__ import annotations

from typing import Optional


class RollstatError(Exception):
    """rollstat itself failed (a bug, a full disk, a write it could not make).

    The base of every rollstat exception: ``except rollstat.RollstatError`` catches
    bad input too."""


class InputError(RollstatError, ValueError):
    """The input was refused: a malformed or inconsistent file, or an argument that
    cannot be used. The message is the command line's one-line error; ``path``,
    ``line`` and ``key`` say where, when the problem has a place (else None)."""

    def __init__(self, message: str, path: Optional[str] = None, line: Optional[int] = None,
                 key: Optional[str] = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.key = key


class RollstatWarning(UserWarning):
    """A condition the command line would print as a warning (the result stands)."""
