"""The test kit's examples run as written and print what they say: docs/plugins.md's "Testing a plugin"
(after "The contract", whose ``PreferZone`` it tests) and the README's plugin section.

Each section's Python blocks run in order in one namespace; every ``# ...`` line right after a line that
prints is the output documented for it, compared with what the blocks print.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def blocks(path: Path, title: str) -> list[str]:
    """The Python blocks of the section `title`, up to the next heading of its level or higher (a ``#``
    line inside a code block is a comment, not a heading)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index(title) + 1
    level = len(title.split(" ", 1)[0])
    fenced, end = False, len(lines)
    for i in range(start, len(lines)):
        line = lines[i]
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(rf"#{{1,{level}}} ", line):
            end = i
            break
    return re.findall(r"```python\n(.*?)```", "\n".join(lines[start:end]) + "\n", flags=re.DOTALL)


def documented_output(code: list[str]) -> list[str]:
    out: list[str] = []
    for block in code:
        lines = block.splitlines()
        for before, line in zip(lines, lines[1:]):
            if "print(" in before and line.startswith("# "):
                out.append(line.removeprefix("# "))
    return out


def run(path: Path, *titles: str) -> tuple[dict[str, Any], list[str], list[str]]:
    """Run the sections' blocks; what they defined, what they printed, what the text says they print."""
    code = [block for title in titles for block in blocks(path, title)]
    namespace: dict[str, Any] = {}  # no __name__: its classes' module is builtins (a dataclass looks it up)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        for block in code:
            exec(compile(block, str(path), "exec"), namespace)
    return namespace, printed.getvalue().splitlines(), documented_output(code)


def test_the_plugin_guides_testing_section_runs_as_documented() -> None:
    namespace, printed, documented = run(ROOT / "docs" / "plugins.md", "## The contract", "## Testing a plugin")
    assert len(documented) == 4 and printed == documented
    placements = namespace["placements"]
    assert [p.node for p in placements] == ["b2", "b1", "a1", None]
    assert namespace["cluster"].pod("web-0")["spec"]["nodeName"] == "b2"


def test_the_readmes_plugin_section_runs_as_documented() -> None:
    namespace, printed, documented = run(ROOT / "README.md", "## Plugins: your own rules, pip-installed")
    assert len(documented) == 1 and printed == documented
    assert namespace["run"].feasible == ["n1"]
