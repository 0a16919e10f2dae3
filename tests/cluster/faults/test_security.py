"""Security on the real API server: what deploy/rbac.yaml's identity may and may not do, a rotated
bearer token taken up by the writes and by the watches, and no credential in a verbose log.

Covered elsewhere, without a cluster: the Deployment runs as non-root with a read-only root file
system (tests/unit/test_manifests.py::test_deployment_is_hardened_and_probed_on_the_secure_port),
extender calls verify TLS by default (tests/unit/test_extenders_http.py::test_https, "verified by
default: an unknown CA fails"), no ``_created`` series (tests/unit/test_metrics.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from kube_helpers import wait
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from scenario import OPERATOR_USER, Rig, log, secrets_of

from kopf_scheduler.cluster import ControlPlane

NAMESPACE = "kopf-scheduler"  # deploy/namespace.yaml: where the ServiceAccount and its Lease Role live


def allowed(
    api: client.ApiClient,
    verb: str,
    resource: str,
    *,
    group: str = "",
    namespace: str = "",
    subresource: str = "",
    name: str = "",
) -> bool:
    review = client.AuthorizationV1Api(api).create_subject_access_review({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {
            "user": OPERATOR_USER,
            "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}", "system:authenticated"],
            "resourceAttributes": {"verb": verb, "resource": resource, "group": group, "namespace": namespace,
                                   "subresource": subresource, "name": name},
        },
    })  # fmt: skip
    return bool(review.status.allowed)


@pytest.mark.parametrize(
    ("verb", "resource", "attrs"),
    [
        pytest.param("get", "secrets", {"namespace": NAMESPACE}, id="read a secret in its own namespace"),
        pytest.param("list", "secrets", {}, id="list secrets cluster-wide"),
        pytest.param("watch", "secrets", {"namespace": "default"}, id="watch secrets"),
        pytest.param("get", "configmaps", {"namespace": "default"}, id="read a configmap"),
        pytest.param("delete", "nodes", {}, id="delete a node"),
        pytest.param("update", "nodes", {}, id="update a node"),
        pytest.param("patch", "nodes", {"subresource": "status"}, id="patch a node's status"),
        pytest.param("patch", "pods", {"namespace": "default"}, id="patch a pod's spec"),
        pytest.param("update", "pods", {"namespace": "default"}, id="update a pod"),
        pytest.param("create", "pods", {"namespace": "default"}, id="create a pod"),
        pytest.param("create", "pods", {"namespace": "default", "subresource": "exec"}, id="exec into a pod"),
        pytest.param("create", "serviceaccounts",
                     {"namespace": NAMESPACE, "subresource": "token", "name": "kopf-scheduler"}, id="mint tokens"),
        pytest.param("create", "clusterrolebindings", {"group": "rbac.authorization.k8s.io"}, id="grant itself more"),
        pytest.param("impersonate", "users", {}, id="impersonate"),
        pytest.param("delete", "leases", {"group": "coordination.k8s.io", "namespace": NAMESPACE},
                     id="delete its Lease"),
        pytest.param("get", "leases", {"group": "coordination.k8s.io", "namespace": "kube-system"},
                     id="leases outside its namespace"),
        pytest.param("delete", "schedulingpolicies", {"group": "scheduling.kopf.dev"}, id="delete a SchedulingPolicy"),
        pytest.param("delete", "namespaces", {}, id="delete a namespace"),
    ],
)  # fmt: skip
def test_the_operator_identity_is_denied(
    api: client.ApiClient, sa_kubeconfig: Path, verb: str, resource: str, attrs: dict[str, str]
) -> None:
    assert not allowed(api, verb, resource, **attrs)


@pytest.mark.parametrize(
    ("verb", "resource", "attrs"),
    [
        pytest.param("create", "pods", {"namespace": "default", "subresource": "binding"}, id="bind"),
        pytest.param("patch", "pods", {"namespace": "default", "subresource": "status"},
                     id="set PodScheduled and nominatedNodeName"),
        pytest.param("delete", "pods", {"namespace": "default"}, id="evict preemption victims"),
        pytest.param("create", "events", {"namespace": "default"}, id="record events"),
        pytest.param("watch", "nodes", {}, id="watch nodes"),
        pytest.param("update", "leases", {"group": "coordination.k8s.io", "namespace": NAMESPACE},
                     id="renew its Lease"),
        pytest.param("patch", "schedulingpolicies", {"group": "scheduling.kopf.dev", "subresource": "status"},
                     id="write policy status"),
    ],
)  # fmt: skip
def test_the_operator_identity_may_do_its_job(
    api: client.ApiClient, sa_kubeconfig: Path, verb: str, resource: str, attrs: dict[str, str]
) -> None:
    assert allowed(api, verb, resource, **attrs)  # the reviews above can say yes: their "no" means something


def test_real_requests_under_its_token_are_refused(
    control_plane: ControlPlane, sa_kubeconfig: Path, namespace: str, rig: Rig
) -> None:
    (node,) = rig.group.nodes(1)
    core = client.CoreV1Api(rig.api)
    core.create_namespaced_pod(namespace, rig.group.pod("target", scheduler=None))
    core.create_namespaced_secret(namespace, {"metadata": {"name": "s"}, "stringData": {"k": "v"}})
    token = json.loads(sa_kubeconfig.read_text())["users"][0]["user"]["token"]
    attempts = {
        "read a secret": ("GET", f"/api/v1/namespaces/{namespace}/secrets/s", None),
        "delete a node": ("DELETE", f"/api/v1/nodes/{node}", None),
        "patch a pod's spec": (
            "PATCH",
            f"/api/v1/namespaces/{namespace}/pods/target",
            {"spec": {"activeDeadlineSeconds": 5}},
        ),
    }
    codes = {what: request_as(control_plane, token, *call) for what, call in attempts.items()}
    assert codes == dict.fromkeys(attempts, 403)
    assert (
        core.read_node(node).metadata.name == node
        and core.read_namespaced_pod("target", namespace).spec.active_deadline_seconds is None
    )


def request_as(cp: ControlPlane, token: str, method: str, path: str, body: Any) -> int:
    """The HTTP status of one request with a bearer token (stdlib, so nothing else's credentials leak in)."""
    import ssl
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        cp.server + path, data=data, method=method, headers={"Authorization": f"Bearer {token}"}
    )
    if data is not None:
        req.add_header("Content-Type", "application/merge-patch+json")
    try:
        with urllib.request.urlopen(
            req, timeout=10, context=ssl.create_default_context(cafile=str(cp.ca_cert))
        ) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_no_client_key_in_a_verbose_log(control_plane: ControlPlane, rig: Rig) -> None:
    # a client-certificate identity bound to the operator's ClusterRole, its key in the kubeconfig
    user = "kopf-scheduler-by-certificate"
    kubeconfig = control_plane.user_kubeconfig(user, path=rig.tmp_path / "cert.kubeconfig")
    rbac = client.RbacAuthorizationV1Api(rig.api)
    binding = {"metadata": {"name": user},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "kopf-scheduler"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}  # fmt: skip
    rbac.create_cluster_role_binding(binding)
    try:
        rig.group.nodes(2)
        rig.policy()
        op = rig.operator(kubeconfig=kubeconfig)  # --verbose
        rig.accepted(op)
        names = [p["metadata"]["name"] for p in rig.pods(20)]
        rig.produce(rig.pods(20)).done(30)
        rig.wait_bound(names, timeout=30)
        op.dump_cache()
        assert secrets_of(kubeconfig), "the kubeconfig holds a client key"
        rig.check_no_secret_in_log(op)
    finally:
        rbac.delete_cluster_role_binding(user)


def bound_token(control_plane: ControlPlane, secret: str) -> str:
    """A TokenRequest token of the operator's ServiceAccount, bound to Secret `secret` (deleting the
    Secret revokes it, as deleting a pod revokes the kubelet's tokens); 600 s, the shortest allowed."""
    uid = control_plane.request("GET", f"/api/v1/namespaces/{NAMESPACE}/secrets/{secret}")["metadata"]["uid"]
    answer = control_plane.request("POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/kopf-scheduler/token", {
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 600,
                 "boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": secret, "uid": uid}},
    })  # fmt: skip
    return str(answer["status"]["token"])


def authenticated(api: client.ApiClient, token: str) -> bool:
    review = client.AuthenticationV1Api(api).create_token_review(
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}
    )
    return bool(review.status.authenticated)


def test_a_rotated_token_is_taken_up_by_the_writes_and_the_watches(control_plane: ControlPlane, rig: Rig) -> None:
    core = client.CoreV1Api(rig.api)
    for name in ("token-a", "token-b"):
        core.create_namespaced_secret(NAMESPACE, {"metadata": {"name": name}})
    try:
        token_file = rig.tmp_path / "token"
        token_file.write_text(first := bound_token(control_plane, "token-a"))
        config = json.loads(rig.sa_kubeconfig.read_text())
        config["users"][0]["user"] = {"tokenFile": str(token_file)}
        kubeconfig = rig.tmp_path / "token-file.kubeconfig"
        kubeconfig.write_text(json.dumps(config))
        rig.group.nodes(4)
        rig.policy()
        op = rig.operator(kubeconfig=kubeconfig)
        rig.accepted(op)

        def batch(prefix: str) -> list[str]:
            bodies = rig.pods(10, prefix=prefix)
            rig.produce(bodies).done(30)
            names = [b["metadata"]["name"] for b in bodies]
            rig.wait_bound(names, timeout=60)
            return names

        names = batch("before")
        # the kubelet's rotation: a new token written over the file (rename), the old one revoked
        rotated = rig.tmp_path / "token.new"
        rotated.write_text(second := bound_token(control_plane, "token-b"))
        os.replace(rotated, token_file)
        core.delete_namespaced_secret("token-a", NAMESPACE)
        wait(
            op,
            lambda: not authenticated(rig.api, first),
            timeout=30,
            message="the old token is refused (the API server caches a good token for 10 s)",
        )
        names += batch("after-rotation")  # binds and events: the Api re-reads the file (or on the first 401)
        # the watches logged in with the old token: make them reconnect, and Kopf's re-login must bring the new one
        control_plane.kill("kube-apiserver")
        control_plane.restart("kube-apiserver")
        names += batch("after-reconnect")
        figures = rig.verdict(pods=names, ops=[op], audit_complete=False)
        text = op.text()
        assert first not in text and second not in text
        log(
            figures.line(
                "bearer token rotated (TokenRequest bound to a Secret, the old one revoked), "
                "then the API server restarted"
            )
        )
        assert figures.bound == len(names)
    finally:
        for name in ("token-a", "token-b"):
            try:
                core.delete_namespaced_secret(name, NAMESPACE)
            except ApiException as exc:
                if exc.status != 404:
                    raise
