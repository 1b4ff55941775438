"""The Python arguments, checked and turned into the values the engine's configurations
take. A wrong type is a ``TypeError`` naming the parameter; a value of the right type
that cannot be used is an :class:`InputError` (a ``ValueError``) naming it."""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterable, Mapping
from typing import Any, Collection, List, Optional, Sequence, Tuple, Union

from ._errors import InputError

PathLike = Union[str, "os.PathLike[str]"]
Paths = Union[PathLike, Sequence[PathLike]]


def _is_path(v: Any) -> bool:
    return isinstance(v, (str, os.PathLike))


def _got(v: Any) -> str:
    return "None" if v is None else type(v).__name__


def bad_value(name: str, why: str) -> InputError:
    return InputError(f"{name}: {why}", None, None, name)


def path(name: str, v: Any) -> str:
    """A path (str or ``os.PathLike``)."""
    if not _is_path(v):
        raise TypeError(f"{name}: expected a path (str or os.PathLike), got {_got(v)}")
    p = os.fspath(v)
    if not isinstance(p, str):
        raise TypeError(f"{name}: expected a text path, got {type(p).__name__}")
    if not p:
        raise bad_value(name, "the path is empty")
    return p


def opt_path(name: str, v: Any) -> Optional[str]:
    return None if v is None else path(name, v)


def paths(name: str, v: Any, *, required: bool = True) -> List[str]:
    """One path or a sequence of them; ``required``: at least one."""
    if v is None and not required:
        return []
    if _is_path(v):
        return [path(name, v)]
    if isinstance(v, (bytes, Mapping)) or not isinstance(v, Iterable):
        raise TypeError(f"{name}: expected a path or a list of paths, got {_got(v)}")
    out = []
    for x in v:
        if not _is_path(x):
            raise TypeError(f"{name}: expected a path or a list of paths, got a {_got(x)} in the list")
        out.append(path(name, x))
    if required and not out:
        raise bad_value(name, "give at least one file")
    return out


def flag(name: str, v: Any) -> bool:
    """A bool (not a truthy value: ``"no"`` is a mistake, not True)."""
    if not isinstance(v, bool):
        raise TypeError(f"{name}: expected True or False, got {_got(v)}")
    return v


def text(name: str, v: Any) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{name}: expected a str, got {_got(v)}")
    return v


def opt_text(name: str, v: Any) -> Optional[str]:
    return None if v is None else text(name, v)


def texts(name: str, v: Any) -> List[str]:
    """One str or a sequence of them."""
    if isinstance(v, str):
        return [v]
    if v is None or isinstance(v, (bytes, Mapping)) or not isinstance(v, Iterable):
        raise TypeError(f"{name}: expected a str or a list of str, got {_got(v)}")
    out = list(v)
    for x in out:
        if not isinstance(x, str):
            raise TypeError(f"{name}: expected a str or a list of str, got a {_got(x)} in the list")
    return out


def count(name: str, v: Any, least: int = 0) -> int:
    """A whole number of at least ``least``."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        raise TypeError(f"{name}: expected an int, got {_got(v)}")
    if v < least:
        raise bad_value(name, f"expected at least {least}, got {v}")
    return int(v)


def opt_count(name: str, v: Any, least: int = 0) -> Optional[int]:
    return None if v is None else count(name, v, least)


def number(name: str, v: Any) -> float:
    """A finite real number."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name}: expected a number, got {_got(v)}")
    f = float(v)
    if not math.isfinite(f):
        raise bad_value(name, f"expected a finite number, got {v!r}")
    return f


def opt_number(name: str, v: Any) -> Optional[float]:
    return None if v is None else number(name, v)


def choice(name: str, v: Any, allowed: Collection[str]) -> str:
    if not isinstance(v, str):
        raise TypeError(f"{name}: expected one of {', '.join(map(repr, allowed))}, got {_got(v)}")
    if v not in allowed:
        raise bad_value(name, f"expected one of {', '.join(map(repr, allowed))}, got {v!r}")
    return v


def by_fingerprint(pair_by: Any) -> bool:
    """``pair_by``: ``"index"`` or ``"fingerprint"``."""
    return choice("pair_by", pair_by, ("index", "fingerprint")) == "fingerprint"


def band(v: Any) -> Optional[Tuple[float, float]]:
    """``band=(lo, hi)``, two numbers with lo <= hi."""
    if v is None:
        return None
    if not isinstance(v, (tuple, list)) or len(v) != 2:
        raise TypeError(f"band: expected a pair of numbers (lo, hi), got {_got(v)}")
    lo, hi = number("band", v[0]), number("band", v[1])
    if lo > hi:
        raise bad_value("band", f"expected lo <= hi, got ({lo!r}, {hi!r})")
    return lo, hi


def sample(v: Any) -> Optional[str]:
    """``sample``: a count (int, at least 1) or a share (float in (0, 1]), in the
    command's spelling."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (numbers.Integral, numbers.Real)):
        raise TypeError(f"sample: expected a count (int) or a share (float), got {_got(v)}")
    if isinstance(v, numbers.Integral):
        return str(count("sample", v, 1))
    f = number("sample", v)
    if not 0 < f <= 1:
        raise bad_value("sample", f"a share is in (0, 1], got {f!r}")
    return repr(f)
