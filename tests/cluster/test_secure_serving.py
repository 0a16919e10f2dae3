"""The secure port on the real control plane, as kube-scheduler's 10259: HTTPS, the probes' paths open
to anyone, /metrics and /debug to whom RBAC allows, tokens and client certificates checked by the API
server (TokenReview, the ``extension-apiserver-authentication`` ConfigMap's client CA, SubjectAccessReview).

The operator runs as deploy/rbac.yaml's ServiceAccount (``system:auth-delegator``, the ConfigMap by name),
so its RBAC is tested for real; the readers are ServiceAccounts and a certificate user bound to
deploy/rbac.yaml's ClusterRoles ``kopf-scheduler-metrics-reader`` and ``kopf-scheduler-debug-reader``.
"""

from __future__ import annotations

import json
import socket
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_helpers import Group, Operator, create_policy, delete_policy, wait, wait_accepted
from kubernetes import client

from kopf_scheduler.cluster import ControlPlane
from kopf_scheduler.cluster.certs import CertPair, create_pki, issue_client_cert

POLICY = "e2e-secure"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str, *, token: str = "", cert: CertPair | None = None) -> tuple[int, Any]:
    """GET over HTTPS as a scraper does (the self-signed certificate not verified): (status, JSON or text)."""
    tls = ssl.create_default_context()
    tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
    if cert is not None:
        tls.load_cert_chain(cert.cert, cert.key)
    request = urllib.request.Request(f"https://127.0.0.1:{port}{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=tls) as response:
            status, text, kind = response.status, response.read().decode(), response.headers.get_content_type()
    except urllib.error.HTTPError as exc:
        status, text, kind = exc.code, exc.read().decode(), exc.headers.get_content_type()
    return status, json.loads(text) if kind == "application/json" else text


@pytest.fixture(scope="module")
def secure(
    sa_kubeconfig: Path, custom: client.CustomObjectsApi, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Operator, int]]:
    port = free_port()
    op = Operator(
        tmp_path_factory.mktemp("operator") / "operator.log",
        ["--policy", POLICY, "--secure-port", str(port)],
        sa_kubeconfig,
    )
    try:
        create_policy(custom, POLICY, {"schedulerName": POLICY})
        wait_accepted(custom, POLICY, op)
        wait(op, lambda: get(port, "/readyz")[0] == 200, timeout=30, message="/readyz answers 200 over HTTPS")
        yield op, port
    finally:
        delete_policy(custom, POLICY)
        op.stop()


@pytest.fixture
def readers(api: client.ApiClient, namespace: str) -> Iterator[dict[str, str]]:
    """Tokens of three ServiceAccounts: `nobody` (no role), `metrics` (the metrics reader), `debug` (both readers)."""
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    bindings: list[str] = []
    tokens: dict[str, str] = {}
    roles = {"nobody": (), "metrics": ("metrics",), "debug": ("metrics", "debug")}
    try:
        for name, granted in roles.items():
            core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
            for role in granted:
                binding = f"secure-serving-{namespace}-{name}-{role}"
                rbac.create_cluster_role_binding({
                    "metadata": {"name": binding},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": f"kopf-scheduler-{role}-reader"},
                    "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
                })  # fmt: skip
                bindings.append(binding)
            answer = core.create_namespaced_service_account_token(
                name, namespace, {"spec": {"expirationSeconds": 3600}}
            )
            tokens[name] = answer.status.token
        yield tokens
    finally:
        for binding in bindings:
            rbac.delete_cluster_role_binding(binding)


def test_probes_answer_anyone_over_https(secure: tuple[Operator, int]) -> None:
    _, port = secure
    assert get(port, "/healthz") == (200, "ok\n")
    assert get(port, "/livez") == (200, "ok\n")
    status, text = get(port, "/readyz")
    assert status == 200 and text.startswith("ok: ")


def test_metrics_answer_401_without_a_token_403_without_the_role_and_200_with_it(
    secure: tuple[Operator, int], readers: dict[str, str], namespace: str
) -> None:
    op, port = secure
    status, body = get(port, "/metrics")
    assert (status, body["reason"], body["message"]) == (401, "Unauthorized", "Unauthorized")
    assert get(port, "/metrics", token="not-a-token")[0] == 401
    status, body = get(port, "/metrics", token=readers["nobody"])
    assert (status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == f'forbidden: User "system:serviceaccount:{namespace}:nobody" cannot get path "/metrics"'
    status, text = get(port, "/metrics", token=readers["metrics"])
    assert status == 200 and "scheduler_schedule_attempts_total" in text
    # the operator's reviews went through its one client: counted as client-go counts them
    assert 'rest_client_requests_total{code="201",host=' in text and 'method="POST"' in text


def test_debug_attempts_need_the_debug_reader(
    secure: tuple[Operator, int], readers: dict[str, str], api: client.ApiClient, namespace: str
) -> None:
    op, port = secure
    with Group(api, scheduler=POLICY) as group:
        group.nodes(1, labels={"secure-serving": group.id})
        client.CoreV1Api(api).create_namespaced_pod(
            namespace, group.pod("placed", node_selector={"secure-serving": group.id})
        )
        path = f"/debug/attempts/{namespace}/placed"
        assert get(port, path)[0] == 401
        assert get(port, path, token=readers["nobody"])[0] == 403
        status, body = get(port, path, token=readers["metrics"])  # /metrics is not /debug
        assert status == 403 and body["message"].endswith(f'cannot get path "{path}"')

        def explained() -> dict[str, Any] | None:
            status, body = get(port, path, token=readers["debug"])
            return body if status == 200 and body.get("outcome") == "scheduled" else None

        data = wait(op, explained, timeout=30, message="the debug reader reads the pod's attempt")
        assert data["pod"] == f"{namespace}/placed"


def test_client_certificates_of_the_cluster_ca_authenticate_their_common_name(
    secure: tuple[Operator, int], control_plane: ControlPlane, api: client.ApiClient, tmp_path: Path
) -> None:
    """The operator found the cluster's client CA in kube-system/extension-apiserver-authentication."""
    op, port = secure
    user = f"alice-{uuid.uuid4().hex[:6]}"
    cluster_ca = CertPair(control_plane.ca_cert, control_plane.pki_dir / "ca.key")
    alice = issue_client_cert(cluster_ca, tmp_path, "alice", user, ("devs",))
    status, body = get(port, "/metrics", cert=alice)
    assert (status, body["message"]) == (403, f'forbidden: User "{user}" cannot get path "/metrics"')
    rbac = client.RbacAuthorizationV1Api(api)
    binding = f"secure-serving-{user}"
    rbac.create_cluster_role_binding({
        "metadata": {"name": binding},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "kopf-scheduler-metrics-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    })  # fmt: skip
    try:
        # the denial above is cached for 10 s, as upstream's; then the new binding counts
        wait(op, lambda: get(port, "/metrics", cert=alice)[0] == 200, timeout=30, message="alice may read /metrics")
    finally:
        rbac.delete_cluster_role_binding(binding)
    stranger = create_pki(tmp_path / "stranger").admin  # a certificate no CA of the cluster signed
    with pytest.raises((ssl.SSLError, urllib.error.URLError, ConnectionError)):
        get(port, "/healthz", cert=stranger)
