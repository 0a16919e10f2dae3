"""Field errors and the small checks every spec validator shares (policies, extenders, legacy import).

Validators collect ``FieldError`` values instead of raising, so one pass reports everything that
is wrong with a spec, each at its path (``spec.priorities[2].weight``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["FieldError", "did_you_mean", "is_int", "is_number", "parse_duration", "unknown_keys"]


@dataclass(frozen=True, slots=True)
class FieldError:
    """One problem in a spec: where (``spec.priorities[2].weight``) and what."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def closest(name: str, candidates: Sequence[str]) -> str | None:
    """The closest candidate to a misspelled name (case-insensitive), or None."""
    if not name or not candidates:
        return None
    lowered = {c.lower(): c for c in candidates}
    match = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    if match:
        return lowered[match[0]]
    # a name missing its "Priority"/"Pred" suffix or prefix, e.g. "NodeAffinityPrio"
    for low, original in lowered.items():
        if len(name) >= 6 and (low.startswith(name.lower()) or name.lower().startswith(low)):
            return original
    return None


def did_you_mean(name: str, candidates: Sequence[str]) -> str:
    """``"; did you mean 'X'?"`` or ``""``."""
    hint = closest(name, candidates)
    return f"; did you mean {hint!r}?" if hint else ""


def unknown_keys(obj: Mapping[str, Any], allowed: Sequence[str], path: str, errors: list[FieldError]) -> None:
    for key in obj:
        if key in allowed:
            continue
        hint = closest(str(key), allowed)
        tail = f"; did you mean {hint!r}?" if hint else f" (allowed: {', '.join(allowed)})"
        errors.append(FieldError(f"{path}.{key}", f"unknown field{tail}"))


_DURATION_PART: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float | None:
    """A Go-style duration ("5s", "1m30s", "250ms") or a number of seconds -> seconds; None if invalid."""
    if is_number(value):
        return float(value)
    if not isinstance(value, str) or not value:
        return None
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(value):
        if m.start() != pos:
            return None
        total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        pos = m.end()
    return total if pos == len(value) else None
