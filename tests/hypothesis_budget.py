"""How many examples the costly hypothesis tests try: ``max_examples=examples(n)``.

CI tries all n (``.ci/run`` runs with ``CI=true``, as CI services set it; hypothesis then also loads its
own ``ci`` profile: derandomized, no example database). Any other run of the unit tests tries half of n:
the same properties on fewer random cases, so a developer's run answers in seconds, while hypothesis'
example database (``.hypothesis/``) replays first whatever failed before. ``CI=true python -m pytest ...``
asks for all of them anywhere.

Measured on 2 shared cores: the tests written with ``examples`` took 19 s of the unit suite's 64 s with
all their examples.
"""

from __future__ import annotations

import os

__all__ = ["examples"]


def examples(n: int) -> int:
    """n in CI, half of n (at least 10) elsewhere."""
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        return n
    return max(10, n // 2)
