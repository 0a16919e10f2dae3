"""Checks of charts/kopf-scheduler, tools/helm and tools/image that need neither Go nor helm.

The chart's CRDs are copies (Helm installs crds/ verbatim and `helm package` drops symlinks), so
one test holds them byte-equal to the repository's crds/, the one source of truth. The rest:
every value is documented and typed by the schema, the templates read no value that does not
exist, the versions agree, the release publishes what they pull, and the Dockerfile reader of
tools/image/check_install.py sees the steps and the context BuildKit would.
tests/tools/test_helm_and_actionlint_build.py runs tools/helm/build.sh and tools/actionlint/build.sh with a
fake go; tests/cluster/test_helm_chart.py renders the chart with helm and compares it with `kubectl kustomize`.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kopf-scheduler"


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def values() -> dict[str, Any]:
    loaded: dict[str, Any] = load_yaml(CHART / "values.yaml")
    return loaded


# --- CRDs: one source of truth ---------------------------------------------------------------


def test_chart_crds_are_the_repository_crds_byte_for_byte() -> None:
    listed = load_yaml(ROOT / "crds" / "Kustomization")["resources"]
    shipped = sorted(p.name for p in (CHART / "crds").iterdir())
    assert shipped == sorted(listed), "charts/kopf-scheduler/crds/ must hold exactly crds/Kustomization's files"
    for name in listed:
        chart_copy, source = CHART / "crds" / name, ROOT / "crds" / name
        assert chart_copy.read_bytes() == source.read_bytes(), (
            f"{chart_copy.relative_to(ROOT)} differs from {source.relative_to(ROOT)}; "
            f"crds/ is the source: cp {source.relative_to(ROOT)} {chart_copy.relative_to(ROOT)}"
        )


def test_chart_dashboard_is_deploys_byte_for_byte() -> None:
    """`.Files.Get` reads only inside the chart: files/ holds a copy of deploy/'s dashboard."""
    copy, source = CHART / "files" / "grafana-dashboard.json", ROOT / "deploy" / "grafana-dashboard.json"
    assert copy.read_bytes() == source.read_bytes(), f"cp {source.relative_to(ROOT)} {copy.relative_to(ROOT)}"


# --- values: documented, typed, used ---------------------------------------------------------


def undocumented_keys(text: str) -> list[str]:
    """Mapping keys (outside list items) whose previous non-blank line is not a comment."""
    missing: list[str] = []
    stack: list[tuple[int, bool]] = []  # (indent, is a list item) of the enclosing lines
    previous = ""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.lstrip()
        if not stripped:
            continue
        if stripped.startswith("#"):
            previous = stripped
            continue
        indent = len(line) - len(stripped)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        in_list = any(is_item for _, is_item in stack)
        if stripped.startswith("- "):
            stack.append((indent, True))
        elif match := re.match(r"([\w.-]+):", stripped):
            if not in_list and not previous.startswith("#"):
                missing.append(f"line {number}: {match.group(1)}")
            stack.append((indent, False))
        previous = stripped
    return missing


def test_every_value_has_a_comment() -> None:
    assert undocumented_keys((CHART / "values.yaml").read_text()) == []


def test_the_documentation_check_finds_an_undocumented_key() -> None:
    text = "# ok\na: 1\nb:\n  # ok\n  c: 2\nlist:\n  - d: 3\n    e: 4\n"
    assert undocumented_keys(text) == ["line 3: b", "line 6: list"]


def schema_paths(schema: dict[str, Any], prefix: str = "") -> set[str]:
    paths: set[str] = set()
    for key, sub in schema.get("properties", {}).items():
        paths.add(prefix + key)
        if sub.get("additionalProperties") is False:
            paths |= schema_paths(sub, f"{prefix}{key}.")
    return paths


def value_paths(tree: dict[str, Any], schema: dict[str, Any], prefix: str = "") -> set[str]:
    """values.yaml's keys, descending only where the schema closes the object."""
    paths: set[str] = set()
    for key, sub in tree.items():
        paths.add(prefix + key)
        sub_schema = schema.get("properties", {}).get(key, {})
        if isinstance(sub, dict) and sub_schema.get("additionalProperties") is False:
            paths |= value_paths(sub, sub_schema, f"{prefix}{key}.")
    return paths


def test_the_schema_names_exactly_the_values() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert schema["additionalProperties"] is False
    assert value_paths(values(), schema) == schema_paths(schema)


def test_templates_read_only_values_that_exist_and_every_value_is_read() -> None:
    templates = "\n".join(p.read_text() for p in sorted((CHART / "templates").iterdir()))
    tree = values()
    read = set(re.findall(r"\.Values\.([\w.]+)", templates))
    for path in read:
        node: Any = tree
        for part in path.split("."):
            assert isinstance(node, dict) and part in node, f"templates read .Values.{path}, which values.yaml lacks"
            node = node[part]
    assert {path.split(".")[0] for path in read} == set(tree)


def test_the_readmes_values_table_names_real_values() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### Install with Helm", 1)[1].split("\n#", 1)[0]
    rows = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    assert rows, "README's Install with Helm section has no values table"
    tree = values()
    for row in rows:
        parent = ""
        for name in re.findall(r"`([^`]+)`", row):
            path = f"{parent}{name}" if name.startswith(".") else name
            parent = path.rsplit(".", 1)[0] if "." in path else ""
            node: Any = tree
            for part in path.lstrip(".").split("."):
                assert isinstance(node, dict) and part in node, f"README names `{path}`, which values.yaml lacks"
                node = node[part]


# --- versions agree --------------------------------------------------------------------------


def test_chart_app_version_is_the_package_version_and_deploys_image_tag() -> None:
    chart = load_yaml(CHART / "Chart.yaml")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert chart["name"] == "kopf-scheduler"
    assert chart["appVersion"] == project["version"]
    deployment = load_yaml(ROOT / "deploy" / "deployment.yaml")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    image = values()["image"]
    assert container["image"] == f"{image['repository']}:{image['tag'] or chart['appVersion']}"
    assert container["imagePullPolicy"] == image["pullPolicy"]
    assert deployment["spec"]["replicas"] == values()["replicas"]


def test_tools_helm_pins_helm_v4() -> None:
    go_mod = (ROOT / "tools" / "helm" / "go.mod").read_text()
    assert re.search(r"^require helm\.sh/helm/v4 v4\.\d+\.\d+$", go_mod, re.M), go_mod
    assert '_ "helm.sh/helm/v4/cmd/helm"' in (ROOT / "tools" / "helm" / "tools.go").read_text()


# --- tools/actionlint and the release workflow ----------------------------------------------

RELEASE = ROOT / ".github" / "workflows" / "release.yaml"


def test_ci_lints_the_workflows() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    assert "tools/actionlint/build.sh" in ci and '"$actionlint_bin/actionlint"' in ci


def test_the_release_publishes_what_the_chart_and_deploy_pull() -> None:
    """A first release must publish the image the chart's defaults and deploy/ name, at the chart's appVersion."""
    workflow = load_yaml(RELEASE)
    assert workflow[True]["push"]["tags"] == ["v[0-9]+.[0-9]+.[0-9]+"]  # YAML 1.1 reads the key `on` as True
    assert workflow["env"]["IMAGE"] == values()["image"]["repository"]
    steps = {s.get("uses", "").split("@")[0]: s for s in workflow["jobs"]["image"]["steps"]}
    build = steps["docker/build-push-action"]["with"]
    assert (build["file"], build["platforms"], build["push"]) == ("deploy/Dockerfile", "linux/amd64,linux/arm64", True)
    assert "type=semver,pattern={{version}}" in steps["docker/metadata-action"]["with"]["tags"]  # X.Y.Z, no "v"
    assert steps["anchore/sbom-action"]["with"]["format"] == "spdx-json"
    chart_steps = " ".join(s.get("run", "") for s in workflow["jobs"]["chart"]["steps"])
    assert "tools/helm/build.sh" in chart_steps and '"$HELM" push' in chart_steps


# --- tools/image/check_install.py: reads the Dockerfile as BuildKit does ---------------------


@pytest.fixture(scope="module")
def image_check() -> Iterator[ModuleType]:
    path = ROOT / "tools" / "image" / "check_install.py"
    spec = importlib.util.spec_from_file_location("_tools_image_check_install", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def test_image_check_finds_the_dockerfiles_pip_steps(image_check: ModuleType) -> None:
    steps = image_check.instructions((ROOT / "deploy" / "Dockerfile").read_text())
    runs = [args for keyword, args in steps if keyword == "RUN"]
    pip_runs = [args for args in runs if re.search(r"(^|\s)pip (wheel|install)\b", args)]
    assert len(pip_runs) == 2, runs  # the wheels in the build stage, their install in the runtime one
    assert [keyword for keyword, _ in steps].count("FROM") == 2
    assert ("CMD", '["kopf-scheduler"]') in steps


@pytest.mark.parametrize(
    ("path", "ignored"),
    [
        pytest.param("pyproject.toml", False, id="listed file"),
        pytest.param("operator/kopf_scheduler/core/state/cache.py", False, id="file under a listed folder"),
        pytest.param("operator/kopf_scheduler/core/__pycache__/cache.cpython-311.pyc", True, id="pycache deep"),
        pytest.param("operator/kopf_scheduler.egg-info/PKG-INFO", True, id="egg-info"),
        pytest.param("bench/bench_core.py", True, id="not listed"),
        pytest.param(".git/HEAD", True, id="git"),
    ],
)
def test_image_check_filters_the_context_as_the_dockerignore_says(
    image_check: ModuleType, path: str, ignored: bool
) -> None:
    rules = image_check.ignore_rules(ROOT / "deploy" / "Dockerfile")
    assert image_check.ignored(path, rules) is ignored
