"""docs/plugins.md's binding-cycle section runs as written: its Python blocks, in order, in one namespace.

The example is a Permit plugin (a gang of two), a PreBind plugin (an annotation through the client)
and a Bind plugin (binds its pods, SKIPs the rest to DefaultBinder), run by the test kit's ``Cluster``
(``simulate``'s ``Simulation``); what it prints in the docs is what it does here.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[2] / "docs" / "plugins.md"
SECTION = "## Permit, PreBind and Bind: the binding cycle"


def blocks() -> list[str]:
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index(SECTION) :]
    section = section[: section.index("\n## ", len(SECTION))]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_binding_cycle_example_runs_as_documented() -> None:
    code = blocks()
    assert len(code) == 4, "a Permit, a PreBind, a Bind plugin, and the run"
    namespace: dict[str, Any] = {"__name__": "docs_example"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        for block in code:
            exec(compile(block, str(DOCS), "exec"), namespace)
    documented = [line.removeprefix("# ") for line in code[-1].splitlines() if line.startswith(("# [", "# {"))]
    assert out.getvalue().splitlines() == documented
    assert [p.node for p in namespace["placements"]] == ["n1", "n1", "n1"]
    bindings = [(m, path, body) for m, path, body in namespace["cluster"].requests if path.endswith("/binding")]
    # TeamBinder bound `api` (its annotation on the Binding); DefaultBinder bound the pair, `right` first
    assert [(path.split("/")[-2], body["metadata"].get("annotations")) for _, path, body in bindings] == [
        ("api", {"example.com/bound-for-team": "web"}),
        ("right", None),
        ("left", None),
    ]
