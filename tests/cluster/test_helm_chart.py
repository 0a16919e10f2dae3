"""charts/kopf-scheduler with the pinned helm (tools/helm/build.sh): equal to deploy/, lint-clean, its
values honoured, packaged whole, installed and uninstalled on the real control plane.

With default values `helm template --include-crds` must give, object by object (parsed, not text),
what `kubectl kustomize deploy/` gives plus deploy/policies/default.yaml, less the Namespace:
Helm installs into a namespace that exists (it keeps the release record there), so the chart
renders none. The helm build is cached like the control plane's: a cold one (about 4 minutes on
2 cores) happens in the first test's fixture when CI's build step has not run before.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]
from kubernetes import client

from kopf_scheduler.cluster import ControlPlane, ensure_binaries

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "kopf-scheduler"
RELEASE = NAMESPACE = "kopf-scheduler"

# A cold helm build in the first test's fixture takes longer than the suite's 300 s default.
pytestmark = pytest.mark.timeout(900)

Key = tuple[str, str, str, str]


def key(obj: dict[str, Any]) -> Key:
    meta = obj["metadata"]
    return (obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])


def parse(text: str) -> dict[Key, dict[str, Any]]:
    objects = [doc for doc in yaml.safe_load_all(text) if doc]
    by_key = {key(obj): obj for obj in objects}
    assert len(by_key) == len(objects), "two objects with one kind, namespace and name"
    return by_key


class Helm:
    """The pinned helm with its caches and config in a folder of its own (never the user's)."""

    def __init__(self, binary: Path, home: Path) -> None:
        self.binary = binary
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.binary), *args], env=self.env, capture_output=True, text=True, timeout=120, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def template(self, *args: str, chart: Path = CHART) -> dict[Key, dict[str, Any]]:
        return parse(self.run("template", RELEASE, str(chart), "--namespace", NAMESPACE, *args).stdout)


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    built = subprocess.run(["bash", str(ROOT / "tools" / "helm" / "build.sh")], capture_output=True, text=True)
    assert built.returncode == 0, f"tools/helm/build.sh failed:\n{built.stderr[-4000:]}"
    return Helm(Path(built.stdout.strip()) / "helm", tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="module")
def kustomized() -> dict[Key, dict[str, Any]]:
    """deploy/ as `kubectl apply -k deploy/` sends it, plus the default policy, less the Namespace."""
    kubectl = ensure_binaries(echo=False) / "kubectl"
    out = subprocess.run([str(kubectl), "kustomize", str(ROOT / "deploy")], capture_output=True, text=True, check=True)
    objects = parse(out.stdout + "\n---\n" + (ROOT / "deploy" / "policies" / "default.yaml").read_text())
    namespaces = [k for k in objects if k[1] == "Namespace"]
    assert [k[3] for k in namespaces] == [NAMESPACE]
    del objects[namespaces[0]]
    return objects


def differences(expected: dict[Key, dict[str, Any]], got: dict[Key, dict[str, Any]]) -> str:
    lines = [f"only in deploy/: {k}" for k in sorted(set(expected) - set(got))]
    lines += [f"only in the chart: {k}" for k in sorted(set(got) - set(expected))]
    for k in sorted(set(expected) & set(got)):
        if expected[k] != got[k]:
            a = json.dumps(expected[k], indent=1, sort_keys=True).splitlines()
            b = json.dumps(got[k], indent=1, sort_keys=True).splitlines()
            lines += [f"{k}:", *difflib.unified_diff(a, b, "deploy/", "chart", lineterm="", n=2)]
    return "\n".join(lines)


def test_default_values_render_what_kustomize_renders(helm: Helm, kustomized: dict[Key, dict[str, Any]]) -> None:
    rendered = helm.template("--include-crds")
    assert rendered == kustomized, differences(kustomized, rendered)


def test_the_packaged_chart_renders_the_same(helm: Helm, tmp_path: Path) -> None:
    """`helm package` keeps crds/ (a symlink there would be dropped, hence the checked copies)."""
    helm.run("package", str(CHART), "--destination", str(tmp_path))
    (package,) = tmp_path.glob("kopf-scheduler-*.tgz")
    assert helm.template("--include-crds", chart=package) == helm.template("--include-crds")


EVERY_VALUE: dict[str, Any] = {
    "fullnameOverride": "sched",
    "image": {"repository": "registry.example/kopf-scheduler", "tag": "9.9.9", "pullPolicy": "Always"},
    "imagePullSecrets": [{"name": "regcred"}],
    "replicas": 3,
    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": None},  # null drops a default
    "defaultPolicy": {"schedulerName": "my-scheduler"},
    "policies": [
        {"name": "bin-packing", "spec": {"schedulerName": "kopf-binpack", "algorithmProvider": "DefaultProvider"}},
    ],
    "leaderElection": {"leaseDuration": 20, "renewDeadline": 12.5, "retryPeriod": 3},
    "extraArgs": ["--verbose"],
    "metrics": {"port": 9100, "tlsSecretName": "sched-tls"},
    "serviceMonitor": {"enabled": True, "interval": "15s", "scrapeTimeout": "10s", "labels": {"release": "prom"},
                       "tlsConfig": {"ca": {"secret": {"name": "my-ca", "key": "ca.crt"}}, "serverName": "sched"}},
    "grafanaDashboard": {"enabled": True, "labels": {"grafana_dashboard": "1", "team": "platform"}},
    "podDisruptionBudget": {"minAvailable": 2},
    "podAnnotations": {"example.com/owner": "platform"},
    "priorityClassName": "system-cluster-critical",
    "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
    "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}],
    "affinity": {"podAntiAffinity": None, "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["system"]}]}]}}},
}  # fmt: skip


@pytest.fixture
def every_value(tmp_path: Path) -> Path:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(EVERY_VALUE))
    return path


def test_lint_is_clean_with_default_and_with_every_value(helm: Helm, every_value: Path) -> None:
    helm.run("lint", "--strict", str(CHART))
    helm.run("lint", "--strict", str(CHART), "--values", str(every_value))


def test_every_value_lands_where_it_says(helm: Helm, every_value: Path) -> None:
    objects = helm.template("--values", str(every_value))
    by_kind = {(k[1], k[3]): obj for k, obj in objects.items()}
    deployment = by_kind["Deployment", "sched"]
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "registry.example/kopf-scheduler:9.9.9"
    assert container["imagePullPolicy"] == "Always"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert deployment["spec"]["replicas"] == 3
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}
    assert container["args"] == [
        "kopf-scheduler", "run", "--leader-elect", "--lease-duration", "20", "--renew-deadline", "12.5",
        "--retry-period", "3", "--secure-port", "9100", "--tls-cert-file", "/etc/kopf-scheduler/tls/tls.crt",
        "--tls-private-key-file", "/etc/kopf-scheduler/tls/tls.key", "--verbose",
    ]  # fmt: skip
    assert container["ports"] == [{"name": "https-metrics", "containerPort": 9100, "protocol": "TCP"}]
    assert {"name": "tls", "mountPath": "/etc/kopf-scheduler/tls", "readOnly": True} in container["volumeMounts"]
    assert {"name": "tls", "secret": {"secretName": "sched-tls"}} in pod["spec"]["volumes"]
    assert pod["metadata"]["annotations"] == {"example.com/owner": "platform"}
    assert pod["spec"]["priorityClassName"] == "system-cluster-critical"
    assert pod["spec"]["nodeSelector"] == EVERY_VALUE["nodeSelector"]
    assert pod["spec"]["tolerations"] == EVERY_VALUE["tolerations"]
    assert pod["spec"]["affinity"] == {"nodeAffinity": EVERY_VALUE["affinity"]["nodeAffinity"]}
    assert pod["spec"]["serviceAccountName"] == "sched"
    service = by_kind["Service", "sched-metrics"]
    assert service["spec"]["ports"][0]["port"] == 9100
    assert service["metadata"]["annotations"]["prometheus.io/port"] == "9100"
    assert by_kind["PodDisruptionBudget", "sched"]["spec"]["minAvailable"] == 2
    monitor = by_kind["ServiceMonitor", "sched"]
    assert monitor["metadata"]["labels"]["release"] == "prom"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint == {
        "port": "https-metrics", "path": "/metrics", "scheme": "https",
        "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
        "tlsConfig": EVERY_VALUE["serviceMonitor"]["tlsConfig"], "interval": "15s", "scrapeTimeout": "10s",
    }  # fmt: skip
    assert set(monitor["spec"]["selector"]["matchLabels"].items()) <= set(service["metadata"]["labels"].items())
    assert by_kind["SchedulingPolicy", "default"]["spec"] == {"schedulerName": "my-scheduler"}
    assert by_kind["SchedulingPolicy", "bin-packing"]["spec"] == EVERY_VALUE["policies"][0]["spec"]
    binding = by_kind["ClusterRoleBinding", "sched"]
    assert binding["roleRef"]["name"] == "sched"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "sched", "namespace": NAMESPACE}]
    assert ("Role", "sched-leader-election") in by_kind
    assert by_kind["ClusterRoleBinding", "sched-auth-delegator"]["subjects"] == binding["subjects"]
    explain = by_kind["Role", "sched-explain"]
    assert explain["rules"][-1]["resourceNames"] == ["sched-explain"]  # the ServiceAccount of the same release
    assert by_kind["ClusterRoleBinding", "sched-explain"]["roleRef"]["name"] == "sched-debug-reader"
    dashboard = by_kind["ConfigMap", "sched-dashboard"]
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1" and dashboard["metadata"]["labels"]["team"]
    assert json.loads(dashboard["data"]["kopf-scheduler.json"]) == json.loads(
        (ROOT / "deploy" / "grafana-dashboard.json").read_text()
    )


def test_the_default_service_monitor_scrapes_https_with_a_token_as_kube_prometheus_does(helm: Helm) -> None:
    """... and is deploy/monitoring/'s, object for object."""
    objects = helm.template("--set", "serviceMonitor.enabled=true")
    (monitor,) = [obj for k, obj in objects.items() if k[1] == "ServiceMonitor"]
    kubectl = ensure_binaries(echo=False) / "kubectl"
    out = subprocess.run(
        [str(kubectl), "kustomize", str(ROOT / "deploy" / "monitoring")], capture_output=True, text=True, check=True
    )
    assert parse(out.stdout) == {key(monitor): monitor}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https" and endpoint["tlsConfig"] == {"insecureSkipVerify": True}
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"


def test_one_replica_runs_without_leader_election_and_two_refuse_to(helm: Helm) -> None:
    objects = helm.template("--set", "leaderElection.enabled=false", "--set", "replicas=1")
    (deployment,) = [obj for k, obj in objects.items() if k[1] == "Deployment"]
    assert "--leader-elect" not in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert not [k for k in objects if k[1] in ("Role", "RoleBinding") and k[3].endswith("-leader-election")]
    refused = helm.run("template", RELEASE, str(CHART), "--set", "leaderElection.enabled=false", check=False)
    assert refused.returncode != 0 and "needs leaderElection.enabled" in refused.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        pytest.param(["--set", "replica=3"], "additional properties 'replica' not allowed", id="a misspelt value"),
        pytest.param(["--set", "metrics.port=http"], "/metrics/port", id="a port that is not a number"),
        pytest.param(["--set", "policies[0].name=x"], "spec", id="a policy without a spec"),
    ],
)
def test_wrong_values_are_refused_naming_them(helm: Helm, args: list[str], says: str) -> None:
    refused = helm.run("template", RELEASE, str(CHART), *args, check=False)
    assert refused.returncode != 0 and says in refused.stderr, refused.stderr


@pytest.fixture
def release(helm: Helm, control_plane: ControlPlane, namespace: str) -> Iterator[str]:
    """A release name; uninstalled afterwards whatever the test did (its namespace goes too)."""
    name = f"chart-{uuid.uuid4().hex[:6]}"
    yield name
    helm.run("uninstall", name, "--kubeconfig", str(control_plane.kubeconfig), "--namespace", namespace, check=False)


def test_helm_install_and_uninstall_on_the_control_plane(
    helm: Helm, control_plane: ControlPlane, namespace: str, release: str, api: client.ApiClient, tmp_path: Path
) -> None:
    """The API server takes every object (the CRD's schema judges the policy); uninstall removes them.

    The default policy is left out: other tests own a policy named "default" on this control plane.
    """
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({
        "defaultPolicy": {"enabled": False},
        "policies": [{"name": release, "spec": {"schedulerName": release, "algorithmProvider": "DefaultProvider"}}],
    }))  # fmt: skip
    kube = ["--kubeconfig", str(control_plane.kubeconfig), "--namespace", namespace]
    helm.run("install", release, str(CHART), "--values", str(values), *kube)
    manifest = parse(helm.run("get", "manifest", release, *kube).stdout)
    fullname = f"{release}-kopf-scheduler"
    assert {(k[1], k[3]) for k in manifest} == {
        ("ServiceAccount", fullname), ("ClusterRole", fullname), ("ClusterRoleBinding", fullname),
        ("Role", f"{fullname}-leader-election"), ("RoleBinding", f"{fullname}-leader-election"),
        ("ClusterRoleBinding", f"{fullname}-auth-delegator"), ("ClusterRole", f"{fullname}-metrics-reader"),
        ("ClusterRole", f"{fullname}-debug-reader"), ("ServiceAccount", f"{fullname}-explain"),
        ("ClusterRoleBinding", f"{fullname}-explain"), ("Role", f"{fullname}-explain"),
        ("Service", f"{fullname}-metrics"), ("Deployment", fullname), ("PodDisruptionBudget", fullname),
        ("SchedulingPolicy", release),
    }  # fmt: skip
    apps, rbac = client.AppsV1Api(api), client.RbacAuthorizationV1Api(api)
    deployment = apps.read_namespaced_deployment(fullname, namespace)
    assert deployment.spec.template.spec.service_account_name == fullname
    subjects = rbac.read_cluster_role_binding(fullname).subjects
    assert [(s.name, s.namespace) for s in subjects] == [(fullname, namespace)]
    policy = client.CustomObjectsApi(api).get_cluster_custom_object(
        "scheduling.kopf.dev", "v1alpha1", "schedulingpolicies", release
    )
    assert policy["spec"]["schedulerName"] == release

    helm.run("uninstall", release, *kube)
    with pytest.raises(client.ApiException) as gone:
        rbac.read_cluster_role(fullname)
    assert gone.value.status == 404
    assert not apps.list_namespaced_deployment(namespace).items
