"""``core/model/paths.py`` builds the API server's paths as it serves them, and no other module of the package
builds one of its own (a string literal beginning with ``/api`` in its code, f-strings included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from source_trees import nodes

from kopf_scheduler.core.model import paths

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "kopf_scheduler"
#: literals that look like the API server's paths and are another server's
NOT_THE_API_SERVER = {"edge/usage.py": {"/api/v1/query?"}}  # Prometheus's instant query


@pytest.mark.parametrize(
    ("built", "expected"),
    [
        pytest.param(paths.collection("v1", "pods"), "/api/v1/pods", id="core group, every namespace"),
        pytest.param(
            paths.collection("v1", "events", namespace="ns"),
            "/api/v1/namespaces/ns/events",
            id="core group, one namespace",
        ),
        pytest.param(paths.collection("apps/v1", "replicasets"), "/apis/apps/v1/replicasets", id="a named group"),
        pytest.param(
            paths.collection("coordination.k8s.io/v1", "leases", namespace="kube-system"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
            id="a named group, one namespace",
        ),
        pytest.param(paths.item("v1", "nodes", "n1"), "/api/v1/nodes/n1", id="a cluster-scoped object"),
        pytest.param(
            paths.item("scheduling.kopf.dev/v1alpha1", "schedulingpolicies", "p", subresource="status"),
            "/apis/scheduling.kopf.dev/v1alpha1/schedulingpolicies/p/status",
            id="a cluster-scoped subresource",
        ),
        pytest.param(paths.pod("ns", "web"), "/api/v1/namespaces/ns/pods/web", id="a pod"),
        pytest.param(paths.pod("ns", "web", "status"), "/api/v1/namespaces/ns/pods/web/status", id="a pod's status"),
    ],
)
def test_paths_are_the_api_servers(built: str, expected: str) -> None:
    assert built == expected


def _raw_paths(module: Path) -> list[str]:
    walked = nodes(module)
    docstrings = {
        id(node.body[0].value)
        for node in walked
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return [
        f"{module.relative_to(PACKAGE)}:{node.lineno}: {node.value!r}"
        for node in walked
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value.startswith("/api")
        and id(node) not in docstrings
        and node.value not in NOT_THE_API_SERVER.get(module.relative_to(PACKAGE).as_posix(), ())
    ]


def test_no_path_is_written_by_hand() -> None:
    raw = [
        found
        for module in sorted(PACKAGE.rglob("*.py"))
        if module != PACKAGE / "core" / "model" / "paths.py"
        for found in _raw_paths(module)
    ]
    assert not raw, "build these with kopf_scheduler.core.model.paths:\n" + "\n".join(raw)
