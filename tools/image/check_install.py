#!/usr/bin/env python3
"""Run deploy/Dockerfile's install steps without a Docker engine, so CI catches a broken image.

    python3 tools/image/check_install.py [--dockerfile deploy/Dockerfile] [--keep DIR]

Reads the Dockerfile and, stage by stage, does what its instructions do to a folder that stands
in for the stage's filesystem: COPY from the repository (filtered by the Dockerfile's
.dockerignore, as BuildKit filters the context), ARG and ENV into the environment, WORKDIR as the
current folder, and every RUN whose command is pip's run by `sh -c` with the stage's Python
(a fresh venv of the FROM image's Python version) first on PATH. Absolute paths in those commands
(/wheels) point into the stage's folder; a `--mount=type=bind,from=STAGE` joins the two stages'
folders. Other RUN steps (groupadd, useradd) change nothing Python sees and are skipped.

Then, in an empty folder with the image's environment, the installed package must import every
module, answer `CMD --help` and `kopf-scheduler run --help`, and pass `pip check`. Limits: the host's
Python of the same minor version stands in for the image's, nothing runs as the image's user, and
PIP_NO_CACHE_DIR is not applied (the pip cache changes how long a download takes, not what is
installed), and pip runs quietly. Exit status 0 when every step passed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOT_APPLIED_ENV = {"PIP_NO_CACHE_DIR"}

# Imports every module of the installed package (an undeclared dependency fails here, as in the
# image) and says where the package came from: the venv, never the checkout.
IMPORT_ALL = """
import importlib, pkgutil, sys
import kopf_scheduler
walked = pkgutil.walk_packages(kopf_scheduler.__path__, "kopf_scheduler.")
names = [m.name for m in walked if not m.name.endswith(".__main__")]  # a __main__ runs the command
for name in names:
    importlib.import_module(name)
print(f"{len(names)} modules imported from {kopf_scheduler.__path__[0]}")
"""


@dataclass
class Stage:
    name: str
    base: str
    root: Path
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = "/"
    cmd: list[str] = field(default_factory=list)
    python: Path | None = None


def instructions(text: str) -> list[tuple[str, str]]:
    """(KEYWORD, arguments) per instruction: continuation lines joined, comments dropped."""
    found: list[tuple[str, str]] = []
    current = ""
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("#") or (not line and not current):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        current += line
        keyword, _, rest = current.strip().partition(" ")
        found.append((keyword.upper(), rest.strip()))
        current = ""
    return found


def key_values(text: str) -> dict[str, str]:
    """ENV/ARG arguments: `K=V K2="V 2"` or the legacy `K V`."""
    words = shlex.split(text)
    if words and "=" not in words[0]:
        return {words[0]: " ".join(words[1:])}
    return dict(word.split("=", 1) if "=" in word else (word, "") for word in words)


def ignore_rules(dockerfile: Path) -> list[tuple[bool, re.Pattern[str]]]:
    """BuildKit's <Dockerfile>.dockerignore (or the context's .dockerignore) as (excluded, regex) rules."""
    path = dockerfile.with_name(dockerfile.name + ".dockerignore")
    if not path.exists():
        path = ROOT / ".dockerignore"
    rules = []
    for line in path.read_text().splitlines() if path.exists() else []:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        excluded = not line.startswith("!")
        pattern = line.lstrip("!").strip().strip("/")
        regex = ""
        i = 0
        while i < len(pattern):
            if pattern.startswith("**/", i):
                regex, i = regex + "(?:.*/)?", i + 3
            elif pattern.startswith("**", i):
                regex, i = regex + ".*", i + 2
            elif pattern[i] == "*":
                regex, i = regex + "[^/]*", i + 1
            elif pattern[i] == "?":
                regex, i = regex + "[^/]", i + 1
            else:
                regex, i = regex + re.escape(pattern[i]), i + 1
        rules.append((excluded, re.compile(regex + r"\Z")))
    return rules


def ignored(relpath: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """As moby's patternmatcher: the last rule matching the path or one of its parents decides."""
    parts = relpath.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    result = False
    for excluded, regex in rules:
        if any(regex.match(candidate) for candidate in candidates):
            result = excluded
    return result


def inside(stage: Stage, container_path: str) -> Path:
    """Where a path of the stage's filesystem is on this machine."""
    base = container_path if container_path.startswith("/") else f"{stage.workdir}/{container_path}"
    return stage.root / base.lstrip("/")


def copy(stage: Stage, args: str, rules: list[tuple[bool, re.Pattern[str]]]) -> None:
    words = [w for w in shlex.split(args) if not w.startswith("--")]
    *sources, dest = words
    target = inside(stage, dest)
    for source in sources:
        src = ROOT / source
        if not src.exists():
            raise SystemExit(f"COPY {source}: not in the build context")
        files = [src] if src.is_file() else sorted(p for p in src.rglob("*") if p.is_file())
        for file in files:
            rel = file.relative_to(ROOT).as_posix()
            if ignored(rel, rules):
                continue
            if src.is_file():
                out = target / file.name if dest.endswith("/") else target
            else:
                out = target / file.relative_to(src)
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(file, out)


def python_of(base: str) -> str:
    """The host's Python of the image's minor version (python:3.11-slim -> python3.11)."""
    match = re.match(r"(?:.*/)?python:(\d+\.\d+)", base)
    if match and shutil.which(f"python{match.group(1)}"):
        return f"python{match.group(1)}"
    print(f"note: no python{match.group(1) if match else '?'} here; using {sys.executable}", file=sys.stderr)
    return sys.executable


def run_step(stage: Stage, flags: list[str], command: str, stages: dict[str, Stage]) -> None:
    for flag in flags:
        if flag.startswith("--mount="):
            opts = dict(kv.split("=", 1) for kv in flag[len("--mount=") :].split(","))
            if opts.get("type") == "bind" and "from" in opts:
                link = inside(stage, opts["target"])
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(inside(stages[opts["from"]], opts.get("source", "/")))
    # absolute paths of the stage's filesystem, e.g. /wheels/*.whl -> STAGE_ROOT/wheels/*.whl
    command = re.sub(r"(?<![\w./-])/(?=[\w])", f"{stage.root}/", command)
    assert stage.python is not None
    env = {**os.environ, **stage.env}
    env["PATH"] = f"{stage.python.parent}:{os.environ['PATH']}"
    env["VIRTUAL_ENV"] = str(stage.python.parent.parent)
    for name in NOT_APPLIED_ENV:
        env.pop(name, None)
    env.setdefault("PIP_QUIET", "1")  # errors still show; the log is not a page of progress bars
    cwd = inside(stage, stage.workdir)
    cwd.mkdir(parents=True, exist_ok=True)
    print(f"--- [{stage.name}] RUN {command}", file=sys.stderr, flush=True)
    subprocess.run(["sh", "-c", command], cwd=cwd, env=env, check=True)


def build(dockerfile: Path, workdir: Path) -> Stage:
    rules = ignore_rules(dockerfile)
    stages: dict[str, Stage] = {}
    stage: Stage | None = None
    for keyword, args in instructions(dockerfile.read_text()):
        if keyword == "FROM":
            words = args.split()
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else str(len(stages))
            stage = Stage(name=name, base=words[0], root=workdir / f"stage-{name}")
            venv = workdir / f"venv-{name}"
            subprocess.run([python_of(stage.base), "-m", "venv", str(venv)], check=True)
            stage.python = venv / "bin" / "python"
            stages[name] = stage
            continue
        if stage is None:
            continue  # ARG before FROM, parser directives
        if keyword == "ENV":
            stage.env.update(key_values(args))
        elif keyword == "ARG":  # no --build-arg here: the default, as `docker build` without one
            for key, value in key_values(args).items():
                stage.env.setdefault(key, value)
        elif keyword == "WORKDIR":
            stage.workdir = args if args.startswith("/") else f"{stage.workdir}/{args}"
        elif keyword == "COPY":
            copy(stage, args, rules)
        elif keyword == "RUN":
            words = args.split()
            flags = []
            while words and words[0].startswith("--"):  # RUN's own flags come before the command
                flags.append(words.pop(0))
            command = " ".join(words)
            if command.split()[0] in ("pip", "pip3", "python", "python3"):
                run_step(stage, flags, command, stages)
            else:
                print(f"--- [{stage.name}] skipped: RUN {command[:60]}...", file=sys.stderr)
        elif keyword == "CMD":
            stage.cmd = json.loads(args) if args.startswith("[") else ["sh", "-c", args]
    assert stage is not None, "no FROM in the Dockerfile"
    return stage


def check(final: Stage, workdir: Path) -> None:
    assert final.python is not None
    env = {**os.environ, **final.env}
    env["PATH"] = f"{final.python.parent}:{os.environ['PATH']}"
    env.pop("PYTHONPATH", None)
    empty = workdir / "empty"
    empty.mkdir()
    checks = [
        [str(final.python), "-c", IMPORT_ALL],
        [*final.cmd, "--help"],
        ["kopf-scheduler", "run", "--help"],
        [str(final.python), "-m", "pip", "check"],
    ]
    for argv in checks:
        shown = " ".join(argv) if argv[1:2] != ["-c"] else f"{argv[0]} -c <import every module>"
        print(f"--- the image: {shown}", file=sys.stderr, flush=True)
        out = subprocess.run(argv, cwd=empty, env=env, check=True, capture_output=True, text=True)
        print("    " + (out.stdout.strip().splitlines() or [""])[0], file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dockerfile", type=Path, default=ROOT / "deploy" / "Dockerfile")
    parser.add_argument("--keep", type=Path, help="work in this folder and leave it (default: a temporary one)")
    args = parser.parse_args()
    start = time.monotonic()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="image-check-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        final = build(args.dockerfile.resolve(), workdir)
        check(final, workdir)
    except subprocess.CalledProcessError as exc:
        print(f"error: {exc}", file=sys.stderr)
        for output in (exc.stdout, exc.stderr):
            if output:
                print(output, file=sys.stderr)
        return 1
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"the Dockerfile's install steps work ({time.monotonic() - start:.0f}s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
