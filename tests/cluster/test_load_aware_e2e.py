"""Load-aware scheduling end to end: node metrics through the real kube-apiserver's aggregator.

The test serves metrics.k8s.io/v1beta1 itself (a small HTTPS server on loopback, the role
metrics-server plays) and registers it with the kube-apiserver as an aggregated APIService backed by
an ExternalName Service naming 127.0.0.1 (the aggregator resolves ExternalName services to
``https://<externalName>:<port>`` and skips the endpoint check for them; the local control plane has no
cluster network for a ClusterIP). The operator, under deploy/'s ServiceAccount and RBAC, polls
``/apis/metrics.k8s.io/v1beta1/nodes`` through the API server like any NodeMetrics client.

Three equal nodes, one of them 90% busy by its metrics: under deploy/policies/load-aware.yaml's
plugins no pod lands on the hot node; under the default profile (which sees only requests) pods
spread over all three. ``explain`` shows the utilisation each load-aware score used.
"""

from __future__ import annotations

import json
import socket
import ssl
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from kube_helpers import Group, Operator, create_policy, delete_policy, wait, wait_accepted
from kubernetes import client
from kubernetes.client.rest import ApiException

from kopf_scheduler.cluster import certs
from kopf_scheduler.commands import main

pytestmark = pytest.mark.cluster

ROOT = Path(__file__).resolve().parents[2]
LOAD_AWARE = "e2e-load-aware"
DEFAULT = "e2e-load-default"
APISERVICE = "v1beta1.metrics.k8s.io"
SERVICE = ("default", "e2e-metrics-server")
DISCOVERY = {
    "kind": "APIResourceList",
    "apiVersion": "v1",
    "groupVersion": "metrics.k8s.io/v1beta1",
    "resources": [
        {"name": "nodes", "singularName": "", "namespaced": False, "kind": "NodeMetrics", "verbs": ["get", "list"]}
    ],
}


class MetricsServer:
    """metrics.k8s.io/v1beta1 over HTTPS on loopback: ``usage`` (node -> (cpu, memory)) as NodeMetrics."""

    def __init__(self, pki_dir: Path) -> None:
        self.usage: dict[str, tuple[str, str]] = {}
        self.requests: list[str] = []
        pki = certs.create_pki(pki_dir)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                outer.requests.append(path)
                if path == "/apis/metrics.k8s.io/v1beta1":
                    self._json(200, DISCOVERY)
                elif path == "/apis/metrics.k8s.io/v1beta1/nodes":
                    self._json(200, outer.node_metrics())
                else:
                    self._json(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404})

            def _json(self, status: int, body: Any) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(pki.serving.cert, pki.serving.key)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = int(self.httpd.server_address[1])
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def node_metrics(self) -> dict[str, Any]:
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        items = [
            {
                "kind": "NodeMetrics",
                "apiVersion": "metrics.k8s.io/v1beta1",
                "metadata": {"name": name},
                "timestamp": now,
                "window": "20s",
                "usage": {"cpu": cpu, "memory": memory},
            }
            for name, (cpu, memory) in self.usage.items()
        ]
        return {"kind": "NodeMetricsList", "apiVersion": "metrics.k8s.io/v1beta1", "metadata": {}, "items": items}

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def metrics_server(api: client.ApiClient, tmp_path_factory: pytest.TempPathFactory) -> Iterator[MetricsServer]:
    server = MetricsServer(tmp_path_factory.mktemp("metrics-pki"))
    core = client.CoreV1Api(api)
    registration = client.ApiregistrationV1Api(api)
    namespace, name = SERVICE
    core.create_namespaced_service(
        namespace,
        {"metadata": {"name": name}, "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}},
    )
    registration.create_api_service(
        {
            "apiVersion": "apiregistration.k8s.io/v1",
            "kind": "APIService",
            "metadata": {"name": APISERVICE},
            "spec": {
                "group": "metrics.k8s.io",
                "version": "v1beta1",
                "service": {"namespace": namespace, "name": name, "port": server.port},
                "insecureSkipTLSVerify": True,
                "groupPriorityMinimum": 100,
                "versionPriority": 100,
            },
        }
    )

    def served() -> bool:
        try:
            client.CustomObjectsApi(api).list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes")
            return True
        except ApiException:
            return False

    try:
        wait(None, served, timeout=60, message="the aggregator serves metrics.k8s.io")
        yield server
    finally:
        registration.delete_api_service(APISERVICE)
        core.delete_namespaced_service(name, namespace)
        server.close()


def load_aware_spec() -> dict[str, Any]:
    """deploy/policies/load-aware.yaml, polling every second."""
    spec: dict[str, Any] = yaml.safe_load((ROOT / "deploy" / "policies" / "load-aware.yaml").read_text())["spec"]
    for entry in spec["priorities"]:
        entry["argument"]["metricsSource"]["interval"] = 1
    return {**spec, "schedulerName": LOAD_AWARE}


@pytest.fixture(scope="module")
def operator(
    sa_kubeconfig: Path,
    custom: client.CustomObjectsApi,
    metrics_server: MetricsServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operator]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    op = Operator(
        tmp_path_factory.mktemp("operator") / "operator.log",
        ["--policy", LOAD_AWARE, "--policy", DEFAULT, "--insecure-port", str(port)],
        sa_kubeconfig,
    )
    op.url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    try:
        create_policy(custom, LOAD_AWARE, load_aware_spec())
        create_policy(custom, DEFAULT, {"schedulerName": DEFAULT})
        wait_accepted(custom, LOAD_AWARE, op)
        wait_accepted(custom, DEFAULT, op)
        yield op
    finally:
        delete_policy(custom, LOAD_AWARE)
        delete_policy(custom, DEFAULT)
        op.stop()


def place(api: client.ApiClient, op: Operator, namespace: str, group: Group, scheduler: str, n: int) -> list[str]:
    core = client.CoreV1Api(api)
    names = [f"{scheduler[-7:]}-{i}" for i in range(n)]
    for name in names:
        core.create_namespaced_pod(namespace, group.pod(name, scheduler, cpu="100m", memory="64Mi"))
    return [
        wait(op, lambda name=name: core.read_namespaced_pod(name, namespace).spec.node_name, message=f"{name} bound")
        for name in names
    ]


def test_pods_avoid_the_hot_node_only_under_the_load_aware_policy(
    api: client.ApiClient,
    namespace: str,
    operator: Operator,
    metrics_server: MetricsServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with Group(api) as group:
        hot, warm, idle = group.nodes(3, cpu="4", memory="8Gi")
        metrics_server.usage.update({hot: ("3600m", "4Gi"), warm: ("400m", "1Gi"), idle: ("100m", "512Mi")})
        polled = metrics_server.requests.count("/apis/metrics.k8s.io/v1beta1/nodes")
        # the operator has polled since the nodes got their metrics (it polls every second)
        wait(
            operator,
            lambda: metrics_server.requests.count("/apis/metrics.k8s.io/v1beta1/nodes") >= polled + 2,
            message="the operator polls metrics.k8s.io through the API server",
        )
        aware = place(api, operator, namespace, group, LOAD_AWARE, 6)
        assert hot not in aware, aware
        default = place(api, operator, namespace, group, DEFAULT, 6)
        assert hot in default, default  # requests alone: every node looks the same, pods spread

        rc = main(["explain", f"{namespace}/{LOAD_AWARE[-7:]}-0", "--endpoint", operator.url, "--output", "json"])  # type: ignore[attr-defined]
        data = json.loads(capsys.readouterr().out)
        assert rc == 0 and data["outcome"] == "scheduled"
        notes = {
            (v["node"], s["plugin"]): s.get("note", "")
            for v in data["nodes"]
            if v["result"] in ("chosen", "feasible")
            for s in v["scores"]
        }
        assert notes[(hot, "TargetLoadPacking")].startswith("cpu 90.0%, memory 50.0% measured"), notes
        assert notes[(hot, "LoadVariationRiskBalancing")].startswith("cpu 90.0%, memory 50.0% measured"), notes
