"""Fixtures of the fault suite: a control plane of its own, killed and restarted by the tests, whose
API server writes an audit log of every pods/binding request (who, which node, which answer) and of
every other write a scheduler makes (pods, their status, evictions, events, Leases, PodGroup and
SchedulingPolicy status: who, which user agent, which answer); reads are not logged.

The session's control plane of the other cluster tests is left alone: this package overrides
``control_plane``, ``kubeconfig`` and ``api`` for its own tests (``namespace``, ``sa_kubeconfig``
and ``custom`` of tests/cluster/conftest.py then use these).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config
from netfaults import StallProxy
from scenario import Rig

from kopf_scheduler.cluster import ControlPlane

#: the verbs that change something; reads (get, list, watch) are never logged
WRITE_VERBS = ["create", "update", "patch", "delete", "deletecollection"]
#: what a scheduler writes, by API group ("pods/binding" names a subresource; "pods" alone does not match it)
WRITTEN_RESOURCES = [
    {"group": "", "resources": ["pods", "pods/binding", "pods/status", "pods/eviction", "events"]},
    {"group": "events.k8s.io", "resources": ["events"]},
    {"group": "coordination.k8s.io", "resources": ["leases"]},
    {"group": "scheduling.k8s.io", "resources": ["podgroups/status"]},
    {"group": "scheduling.x-k8s.io", "resources": ["podgroups/status"]},
    {"group": "scheduling.kopf.dev", "resources": ["schedulingpolicies/status"]},
]
#: The first rule that matches decides. Request level for pods/binding: the audit event then carries the
#: Binding (its target node). Metadata level for every other write a scheduler makes: who, from which
#: user agent (``scenario.writes``), on what, with which answer.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        {"level": "Request", "verbs": ["create"], "resources": [{"group": "", "resources": ["pods/binding"]}]},
        {"level": "Metadata", "verbs": WRITE_VERBS, "resources": WRITTEN_RESOURCES},
        {"level": "None"},
    ],
}


@pytest.fixture(scope="package")
def audit_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("audit") / "audit.log"


@pytest.fixture(scope="package")
def control_plane(tmp_path_factory: pytest.TempPathFactory, audit_log: Path) -> Iterator[ControlPlane]:
    policy = audit_log.parent / "audit-policy.json"
    policy.write_text(json.dumps(AUDIT_POLICY))
    cp = ControlPlane(
        tmp_path_factory.mktemp("fault-plane"),
        die_with_parent=True,
        extra_apiserver_args=[
            f"--audit-policy-file={policy}",
            f"--audit-log-path={audit_log}",
            "--audit-log-format=json",
        ],
    )
    cp.up()
    try:
        yield cp
    finally:
        cp.down()


@pytest.fixture(scope="package")
def kubeconfig(control_plane: ControlPlane) -> Path:
    return control_plane.kubeconfig


@pytest.fixture(scope="package")
def api(kubeconfig: Path) -> Iterator[client.ApiClient]:
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def rig(
    control_plane: ControlPlane,
    api: client.ApiClient,
    custom: client.CustomObjectsApi,
    sa_kubeconfig: Path,
    namespace: str,
    audit_log: Path,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Rig]:
    """Nodes, a policy, operators and pods for one test; torn down after it (operator logs printed on failure)."""
    r = Rig(control_plane, api, custom, sa_kubeconfig, namespace, audit_log, tmp_path)
    failed_before = request.session.testsfailed
    try:
        yield r
    finally:
        if request.session.testsfailed > failed_before:
            r.print_logs(request)
        r.close()


@pytest.fixture
def stall_proxy(control_plane: ControlPlane) -> Iterator[StallProxy]:
    """A StallProxy in front of this package's API server (it keeps its port across a restart); an operator
    goes through it with ``rig.operator(kubeconfig=netfaults.proxied_kubeconfig(rig.sa_kubeconfig, proxy, path))``."""
    with StallProxy(control_plane.server) as proxy:
        yield proxy
