"""README's map of ``operator/kopf_scheduler/`` (its Architecture section) names every module, and nothing else.

The map is a fenced block whose first line is ``operator/kopf_scheduler/``. A line indented by fewer than
``NAME_COLUMN`` spaces begins with the names it describes (``objects.py parsing.py``, ``core/``), two spaces of
indentation per folder level; a longer indent continues a description. A module is on the map when its name
is listed under its folder, or when a folder of it is listed with nothing under it (``plugins/``: one
module per plugin). ``__init__.py`` files are left out.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "operator" / "kopf_scheduler"
README = ROOT / "README.md"
#: names sit at indents 2, 4, 6...; descriptions continue further right
NAME_COLUMN = 8
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.py|/)")


def the_map(text: str) -> list[str]:
    match = re.search(r"```\noperator/kopf_scheduler/\n(.*?)```", text, flags=re.DOTALL)
    assert match is not None, "README.md has no map of operator/kopf_scheduler/"
    return match.group(1).splitlines()


def parse(lines: list[str]) -> tuple[set[str], set[str]]:
    """The modules and the folders the map lists, as paths relative to the package (folders end with ``/``)."""
    listed: set[str] = set()
    folders: set[str] = set()
    stack: list[str] = []  # the folder at each level above the current line
    for number, line in enumerate(lines, 1):
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= NAME_COLUMN:
            continue
        assert indent % 2 == 0 and indent >= 2, f"map line {number}: indent {indent} is not a folder level"
        level = indent // 2 - 1
        assert level <= len(stack), f"map line {number}: indented past its folder"
        del stack[level:]
        names = []
        for word in line.split():
            if NAME.fullmatch(word) is None:
                break
            names.append(word)
        assert names, f"map line {number} names no module or folder: {line.strip()!r}"
        prefix = "".join(stack)
        for name in names:
            (folders if name.endswith("/") else listed).add(prefix + name)
        if names[-1].endswith("/"):
            assert len(names) == 1, f"map line {number}: a folder has a line of its own"
            stack.append(names[0])
    return listed, folders


def covered(module: str, listed: set[str], folders: set[str]) -> bool:
    if module in listed:
        return True
    parts = module.split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        folder = "/".join(parts[:depth]) + "/"
        # a folder stands for its modules only when the map lists nothing inside it
        if folder in folders and not any(p != folder and p.startswith(folder) for p in listed | folders):
            return True
    return False


def modules() -> set[str]:
    return {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and "__pycache__" not in path.parts
    }


def test_every_module_is_on_the_map() -> None:
    listed, folders = parse(the_map(README.read_text(encoding="utf-8")))
    missing = sorted(m for m in modules() if not covered(m, listed, folders))
    assert not missing, f"README.md's map of operator/kopf_scheduler/ leaves out: {', '.join(missing)}"


def test_the_map_names_nothing_that_does_not_exist() -> None:
    listed, folders = parse(the_map(README.read_text(encoding="utf-8")))
    stale = sorted(n for n in listed if not (PACKAGE / n).is_file())
    stale += sorted(f for f in folders if not (PACKAGE / f).is_dir())
    assert not stale, f"README.md's map of operator/kopf_scheduler/ names what is not there: {', '.join(stale)}"


SAMPLE = """```
operator/kopf_scheduler/
  framework.py        the plugin API
  core/        PURE: described
               over two lines
    objects.py parsing.py         types; bodies -> types
    plugins/                      one module per plugin
    dra/                          DRA:
      tracker.py                  the tracker
  kube/        the operator
    main.py                       the entry
```"""


@pytest.mark.parametrize(
    ("module", "expected"),
    [
        pytest.param("framework.py", True, id="a top-level module"),
        pytest.param("core/parsing.py", True, id="the second name of a line"),
        pytest.param("core/plugins/node_name.py", True, id="a folder listed with nothing under it"),
        pytest.param("core/dra/tracker.py", True, id="a module of a nested folder"),
        pytest.param("core/dra/allocator.py", False, id="a folder that lists modules lists them all"),
        pytest.param("kube/app.py", False, id="a module left out"),
        pytest.param("kube/objects.py", False, id="a name listed under another folder"),
        pytest.param("core/over.py", False, id="a continued description names nothing"),
    ],
)
def test_the_map_is_read_as_a_tree(module: str, expected: bool) -> None:
    listed, folders = parse(the_map(SAMPLE))
    assert covered(module, listed, folders) is expected
