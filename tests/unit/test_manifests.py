"""Static checks of crds/ and deploy/: every file parses, RBAC is least-privilege, the Deployment is
hardened, the CRD schema is structural, the example policies conform to it, and the dashboard only
queries metrics the operator exports.

The schema checker below covers the OpenAPI keywords the CRD uses (type, enum, required,
properties, items, ranges, lengths, pattern, anyOf/not, list-map keys). The CEL rules
(x-kubernetes-validations) need a real API server; tests that apply crds/ there cover them.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml  # type: ignore[import-untyped]

from kopf_scheduler.telemetry.metrics import SchedulerMetrics

ROOT = Path(__file__).resolve().parents[2]
CRDS, DEPLOY = ROOT / "crds", ROOT / "deploy"
POLICIES = DEPLOY / "policies"
YAML_FILES = sorted([*CRDS.rglob("*.yaml"), *DEPLOY.rglob("*.yaml")])


@functools.cache
def _parsed(path: Path) -> tuple[dict[str, Any], ...]:
    with path.open(encoding="utf-8") as f:
        return tuple(doc for doc in yaml.safe_load_all(f) if doc is not None)


def load_all(path: Path) -> list[dict[str, Any]]:
    """The documents of `path`, parsed once per run (``find`` reads every file for each object it looks up);
    each caller gets its own copy to change."""
    return copy.deepcopy(list(_parsed(path)))


def objects(*paths: Path) -> Iterator[dict[str, Any]]:
    for path in paths:
        yield from load_all(path)


def find(kind: str, name: str) -> dict[str, Any]:
    for path in YAML_FILES:
        for doc in load_all(path):
            if doc.get("kind") == kind and doc.get("metadata", {}).get("name") == name:
                return doc
    raise AssertionError(f"no {kind} {name} in crds/ or deploy/")


def crd_schema() -> dict[str, Any]:
    (version,) = find("CustomResourceDefinition", "schedulingpolicies.scheduling.kopf.dev")["spec"]["versions"]
    schema: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


# --- a compact OpenAPI v3 (structural schema) checker ----------------------------------------

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def violations(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Every way `value` breaks `schema`, as "path: problem"; empty when it conforms."""
    where = path or "<root>"
    kind = schema.get("type")
    if kind is not None and not _has_type(value, kind):
        return [f"{where}: expected {kind}, got {type(value).__name__}"]
    found: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: {value!r} not in {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        found += _number_violations(schema, value, where)
    if isinstance(value, str):
        found += _string_violations(schema, value, where)
    if isinstance(value, dict):
        found += _object_violations(schema, value, path)
    if isinstance(value, list):
        found += _array_violations(schema, value, path)
    if "anyOf" in schema and all(violations(sub, value, path) for sub in schema["anyOf"]):
        found.append(f"{where}: must validate at least one schema (anyOf)")
    if "not" in schema and not violations(schema["not"], value, path):
        found.append(f"{where}: must not validate the schema (not)")
    return found


def _has_type(value: Any, kind: str) -> bool:
    """JSON Schema's types: a boolean is no integer or number here, unlike in Python."""
    return isinstance(value, _TYPES[kind]) and (kind == "boolean" or not isinstance(value, bool))


def _number_violations(schema: dict[str, Any], value: float, where: str) -> list[str]:
    found = []
    if "minimum" in schema and value < schema["minimum"]:
        found.append(f"{where}: {value} < minimum {schema['minimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        found.append(f"{where}: {value} > maximum {schema['maximum']}")
    return found


def _string_violations(schema: dict[str, Any], value: str, where: str) -> list[str]:
    found = []
    if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", len(value)):
        found.append(f"{where}: length {len(value)} outside bounds")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        found.append(f"{where}: {value!r} does not match {schema['pattern']}")
    return found


def _object_violations(schema: dict[str, Any], value: dict[str, Any], path: str) -> list[str]:
    where = path or "<root>"
    found = []
    if len(value) < schema.get("minProperties", 0) or len(value) > schema.get("maxProperties", len(value)):
        found.append(f"{where}: {len(value)} properties outside bounds")
    found += [f"{where}: missing required {key!r}" for key in schema.get("required", []) if key not in value]
    props: dict[str, Any] | None = schema.get("properties")
    open_ended = props is None or schema.get("x-kubernetes-preserve-unknown-fields", False)
    for key, item in value.items():
        if props is not None and key in props:
            found.extend(violations(props[key], item, f"{path}.{key}"))
        elif not open_ended:
            found.append(f"{where}: unknown field {key!r}")  # kubectl's strict validation refuses these
    return found


def _array_violations(schema: dict[str, Any], value: list[Any], path: str) -> list[str]:
    where = path or "<root>"
    found = []
    if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", len(value)):
        found.append(f"{where}: {len(value)} items outside bounds")
    for i, item in enumerate(value):
        found.extend(violations(schema.get("items", {}), item, f"{path}[{i}]"))
    if schema.get("x-kubernetes-list-type") == "map":
        keys = [
            tuple(item.get(k) for k in schema["x-kubernetes-list-map-keys"]) for item in value if isinstance(item, dict)
        ]
        if len(keys) != len(set(keys)):
            found.append(f"{where}: duplicate list-map keys {keys}")
    return found


def policy(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.kopf.dev/v1alpha1",
        "kind": "SchedulingPolicy",
        "metadata": {"name": "p"},
        "spec": {"schedulerName": "kopf-scheduler", **spec},
    }


# --- every file parses -----------------------------------------------------------------------


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_yaml_parses_into_kubernetes_objects(path: Path) -> None:
    docs = load_all(path)
    assert docs, "empty manifest"
    for doc in docs:
        assert isinstance(doc, dict) and doc.get("apiVersion") and doc.get("kind"), doc


#: kustomize reads kustomization.yaml, kustomization.yml or Kustomization; the folders users may also apply with
#: `kubectl apply -f` name theirs Kustomization, which kubectl's -f (.yaml, .yml and .json files only) passes over
APPLYABLE = (CRDS, CRDS / "optional", POLICIES)


def _kustomization(directory: Path) -> Path:
    (found,) = [p for p in (directory / n for n in ("kustomization.yaml", "Kustomization")) if p.is_file()]
    return found


def test_kustomizations_list_every_manifest_and_resolve() -> None:
    for directory in (CRDS, CRDS / "optional", DEPLOY, POLICIES):
        (kustomization,) = load_all(_kustomization(directory))
        listed = kustomization["resources"]
        for entry in listed:
            target = (directory / entry).resolve()
            assert target.is_file() or _kustomization(target).is_file(), f"{directory}: {entry}"
        here = {p.name for p in directory.glob("*.yaml")} - {"kustomization.yaml"}
        assert here <= set(listed), f"{directory} leaves out {here - set(listed)}"
    (base,) = load_all(DEPLOY / "kustomization.yaml")
    assert base["namespace"] == "kopf-scheduler" and "../crds" in base["resources"]
    assert "policies" not in base["resources"]  # CRs cannot be applied in the same pass as their CRD
    (crds,) = load_all(_kustomization(CRDS))
    assert "optional" not in crds["resources"]  # the coscheduling CRD may belong to scheduler-plugins


def test_dashboard_is_json_and_queries_only_exported_metrics() -> None:
    dashboard = json.loads((DEPLOY / "grafana-dashboard.json").read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    assert len(dashboard["panels"]) >= 5 and len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    # Families are declared (# TYPE) even before any sample; a histogram h exposes h_bucket etc.
    exported: set[str] = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", SchedulerMetrics().render().decode(), flags=re.M):
        suffixes = ("_bucket", "_count", "_sum") if kind == "histogram" else ("",)
        exported.update(name + suffix for suffix in suffixes)
    family = r"\b((?:scheduler|kopf_scheduler|rest_client|process|python)_[a-z_]+)\b"
    used = {name for expr in exprs for name in re.findall(family, expr)}
    assert used and used <= exported, f"not exported: {used - exported}"
    for needed in (
        "scheduler_schedule_attempts_total",
        "scheduler_pending_pods",
        "kopf_scheduler_leader",
        "scheduler_binding_duration_seconds_bucket",
        "scheduler_scheduling_attempt_duration_seconds_bucket",
        "process_cpu_seconds_total",
        "rest_client_requests_total",
        "scheduler_plugin_execution_duration_seconds_bucket",
        "scheduler_framework_extension_point_duration_seconds_bucket",
    ):
        assert needed in used


def test_dockerfile_runs_as_65532_with_cmd_matching_the_deployment_args() -> None:
    text = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^FROM python:3\.11-slim\b", text, flags=re.M)
    assert re.search(r"^USER 65532(:65532)?$", text, flags=re.M)
    assert re.search(r'^CMD \["kopf-scheduler"\]$', text, flags=re.M)
    assert not re.search(r"^ENTRYPOINT", text, flags=re.M)  # args[0] is "kopf-scheduler" itself


# --- RBAC ------------------------------------------------------------------------------------

EXPECTED_CLUSTER_RULES = {
    ("", "pods"): {"get", "list", "watch", "delete"},
    ("", "pods/binding"): {"create"},
    ("", "pods/status"): {"patch", "update"},
    ("", "events"): {"create", "patch", "list"},
    ("events.k8s.io", "events"): {"create", "patch"},
    **{
        ("", r): {"list", "watch"}
        for r in (
            "nodes",
            "services",
            "replicationcontrollers",
            "namespaces",
        )
    },
    # VolumeBinding's PreBind patches both
    **{("", r): {"list", "watch", "patch"} for r in ("persistentvolumes", "persistentvolumeclaims")},
    ("apps", "replicasets"): {"list", "watch"},
    ("apps", "statefulsets"): {"list", "watch"},
    ("storage.k8s.io", "storageclasses"): {"list", "watch"},
    ("storage.k8s.io", "csinodes"): {"list", "watch"},
    ("storage.k8s.io", "csidrivers"): {"list", "watch"},
    ("storage.k8s.io", "csistoragecapacities"): {"list", "watch"},
    ("policy", "poddisruptionbudgets"): {"list", "watch"},
    ("scheduling.k8s.io", "priorityclasses"): {"list"},
    **{(g, "podgroups"): {"list", "watch"} for g in ("scheduling.k8s.io", "scheduling.x-k8s.io")},
    **{(g, "podgroups/status"): {"patch"} for g in ("scheduling.k8s.io", "scheduling.x-k8s.io")},
    ("resource.k8s.io", "resourceclaims"): {"get", "list", "watch", "update", "create", "patch", "delete"},
    ("resource.k8s.io", "resourceclaims/status"): {"update", "patch"},
    ("resource.k8s.io", "resourceclaims/binding"): {"update", "patch"},
    ("resource.k8s.io", "deviceclasses"): {"list", "watch"},
    ("resource.k8s.io", "resourceslices"): {"list", "watch"},
    ("resource.k8s.io", "devicetaintrules"): {"list", "watch"},
    ("scheduling.kopf.dev", "schedulingpolicies"): {"get", "list", "watch", "patch"},
    ("scheduling.kopf.dev", "schedulingpolicies/status"): {"get", "patch", "update"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
    ("metrics.k8s.io", "nodes"): {"list"},
    # the secure port's client CA, one ConfigMap by name
    ("", "configmaps/extension-apiserver-authentication"): {"get"},
}


def flatten(rules: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    """(group, resource) -> verbs; a rule limited to names counts as (group, resource/name) for each."""
    granted: dict[tuple[str, str], set[str]] = {}
    for rule in rules:
        assert not rule.get("nonResourceURLs"), rule
        names = rule.get("resourceNames") or [""]
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for name in names:
                    key = (group, f"{resource}/{name}" if name else resource)
                    granted.setdefault(key, set()).update(rule["verbs"])
    return granted


def test_cluster_role_has_no_wildcards_and_exactly_the_verbs_used() -> None:
    role = find("ClusterRole", "kopf-scheduler")
    for rule in role["rules"]:
        for key in ("apiGroups", "resources", "verbs"):
            assert all("*" not in item for item in rule[key]), f"wildcard in {key}: {rule}"
    granted = flatten(role["rules"])
    assert granted == EXPECTED_CLUSTER_RULES
    # No peering (we run --standalone), no secrets, no writes to pods beyond status and binding.
    assert not any(group == "kopf.dev" for group, _ in granted)
    assert ("", "secrets") not in granted and "patch" not in granted[("", "pods")]


def test_leases_are_a_namespaced_role_with_get_create_update_only() -> None:
    role = find("Role", "kopf-scheduler-leader-election")
    assert role["metadata"]["namespace"] == "kopf-scheduler"
    assert flatten(role["rules"]) == {("coordination.k8s.io", "leases"): {"get", "create", "update"}}
    subject = {"kind": "ServiceAccount", "name": "kopf-scheduler", "namespace": "kopf-scheduler"}
    for kind, name, ref_kind in (
        ("RoleBinding", "kopf-scheduler-leader-election", "Role"),
        ("ClusterRoleBinding", "kopf-scheduler", "ClusterRole"),
    ):
        binding = find(kind, name)
        assert binding["subjects"] == [subject]
        assert binding["roleRef"]["kind"] == ref_kind
        find(ref_kind, binding["roleRef"]["name"])
    find("ServiceAccount", "kopf-scheduler")


def test_the_secure_port_delegates_to_the_api_server_and_readers_are_roles_of_their_own() -> None:
    operator = {"kind": "ServiceAccount", "name": "kopf-scheduler", "namespace": "kopf-scheduler"}
    delegator = find("ClusterRoleBinding", "kopf-scheduler-auth-delegator")
    assert delegator["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator",
    }  # fmt: skip
    assert delegator["subjects"] == [operator]
    assert find("ClusterRole", "kopf-scheduler-metrics-reader")["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}
    ]
    assert find("ClusterRole", "kopf-scheduler-debug-reader")["rules"] == [
        {"nonResourceURLs": ["/debug/*"], "verbs": ["get"]}
    ]
    explain = {"kind": "ServiceAccount", "name": "kopf-scheduler-explain", "namespace": "kopf-scheduler"}
    find("ServiceAccount", "kopf-scheduler-explain")
    binding = find("ClusterRoleBinding", "kopf-scheduler-explain")
    assert binding["subjects"] == [explain] and binding["roleRef"]["name"] == "kopf-scheduler-debug-reader"
    role = find("Role", "kopf-scheduler-explain")
    assert role["metadata"]["namespace"] == "kopf-scheduler"
    assert flatten(role["rules"]) == {
        ("coordination.k8s.io", "leases"): {"get"},
        ("", "pods"): {"list"},
        ("", "pods/proxy"): {"get"},
        ("", "serviceaccounts/token/kopf-scheduler-explain"): {"create"},
    }


# --- Deployment and Service ------------------------------------------------------------------


def test_deployment_is_hardened_and_probed_on_the_secure_port() -> None:
    deployment = find("Deployment", "kopf-scheduler")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert spec["replicas"] == 2 and pod["serviceAccountName"] == "kopf-scheduler"
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert container["image"] == "ghcr.io/kopf-scheduler/kopf-scheduler:0.1.0"
    assert container["args"] == ["kopf-scheduler", "run", "--leader-elect", "--secure-port", "10259"]
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    sc = container["securityContext"]
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] == 65532
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert set(container["resources"]) == {"requests", "limits"}
    for kind in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][kind])
    (port,) = container["ports"]
    assert port["containerPort"] == 10259
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        http = container[probe]["httpGet"]
        assert http["path"] == path and http["port"] in (10259, port["name"]) and http["scheme"] == "HTTPS"
    mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
    assert "/tmp" in mounts  # the only writable path with a read-only root filesystem


def test_metrics_service_selects_the_deployment_pods() -> None:
    (service,) = [o for o in objects(*YAML_FILES) if o["kind"] == "Service"]
    labels = find("Deployment", "kopf-scheduler")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert [(p["port"], p["targetPort"]) for p in service["spec"]["ports"]] == [(10259, "https-metrics")]
    assert service["metadata"]["annotations"]["prometheus.io/scheme"] == "https"


# --- the CRD ---------------------------------------------------------------------------------


def test_crd_names_scope_columns_and_status() -> None:
    crd = find("CustomResourceDefinition", "schedulingpolicies.scheduling.kopf.dev")
    spec = crd["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["kind"]) == (
        "scheduling.kopf.dev",
        "Cluster",
        "SchedulingPolicy",
    )
    assert spec["names"]["shortNames"] == ["schedpol"] and spec["names"]["categories"] == ["kopf-scheduler"]
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Scheduler": ".spec.schedulerName",
        "Accepted": '.status.conditions[?(@.type=="Accepted")].status',
        "Reason": '.status.conditions[?(@.type=="Accepted")].reason',
        "Age": ".metadata.creationTimestamp",
    }
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert {"conditions", "observedGeneration", "activeGeneration"} <= set(status)
    assert status["conditions"]["items"]["properties"]["status"]["enum"] == ["True", "False", "Unknown"]


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for key, sub in schema.get("properties", {}).items():
        yield from _nodes(sub, f"{path}.{key}")
    if "items" in schema:
        yield from _nodes(schema["items"], f"{path}[]")


def test_crd_schema_is_structural_and_closed() -> None:
    open_paths = []
    for path, node in _nodes(crd_schema()):
        assert "type" in node, f"{path or '<root>'} has no type (not structural)"
        if node.get("x-kubernetes-preserve-unknown-fields"):
            open_paths.append(path)
        if node.get("x-kubernetes-list-type") == "map":
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in node["items"].get("required", []), f"{path}: list-map key {key} must be required"
    # Only plugin arguments stay open: each plugin validates its own (core/config/policy.py reports errors).
    assert open_paths == [
        ".spec.predicates[].argument",
        ".spec.priorities[].argument",
        ".spec.plugins[].argument",
        ".spec.queueSort[].argument",
        ".spec.pluginConfig[].args",
    ]


@pytest.mark.parametrize(
    "path", sorted(p for p in POLICIES.glob("*.yaml") if p.name != "kustomization.yaml"), ids=lambda p: p.name
)
def test_example_policies_conform_to_the_crd(path: Path) -> None:
    (doc,) = load_all(path)
    assert doc["kind"] == "SchedulingPolicy" and doc["apiVersion"] == "scheduling.kopf.dev/v1alpha1"
    assert violations(crd_schema(), doc) == []


def test_example_policies_cover_what_they_promise() -> None:
    def spec(name: str) -> dict[str, Any]:
        (doc,) = load_all(POLICIES / f"{name}.yaml")
        return doc["spec"]  # type: ignore[no-any-return]

    assert spec("default") == {"schedulerName": "kopf-scheduler"}  # today's default profile
    assert spec("default-provider") == {
        "schedulerName": "kopf-default-provider",
        "algorithmProvider": "DefaultProvider",
    }
    binpack = spec("bin-packing")
    assert binpack["schedulerName"] == "kopf-binpack"
    assert {p["name"] for p in binpack["predicates"]} == {
        "NoVolumeZoneConflict",
        "MaxEBSVolumeCount",
        "MaxGCEPDVolumeCount",
        "MaxAzureDiskVolumeCount",
        "MatchInterPodAffinity",
        "NoDiskConflict",
        "GeneralPredicates",
        "CheckNodeMemoryPressure",
        "CheckNodeDiskPressure",
        "CheckNodeCondition",
        "PodToleratesNodeTaints",
        "CheckVolumeBinding",
    }  # v1.9 DefaultProvider predicates
    assert {p["name"]: p["weight"] for p in binpack["priorities"]} == {
        "MostRequestedPriority": 1,
        "SelectorSpreadPriority": 1,
        "InterPodAffinityPriority": 1,
        "BalancedResourceAllocation": 1,
        "NodePreferAvoidPodsPriority": 10000,
        "NodeAffinityPriority": 1,
        "TaintTolerationPriority": 1,
    }  # v1.9 default priorities with LeastRequested -> MostRequested
    legacy = spec("legacy-imported")
    assert legacy["schedulerName"] == "kopf-legacy" and "algorithmProvider" not in legacy
    assert "argument" in str(legacy) and '"kind": "Policy"' in (POLICIES / "legacy-imported.yaml").read_text()


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        pytest.param({"schedulerName": None}, "expected string", id="schedulerName null"),
        pytest.param({"schedulerName": "Kopf_Scheduler"}, "does not match", id="schedulerName not DNS"),
        pytest.param({"algorithmProvider": "Fancy"}, "not in", id="unknown provider"),
        pytest.param({"predicates": [{"name": "x"}]}, "does not match", id="one-letter name"),
        pytest.param({"predicates": [{"name": "-bad"}]}, "does not match", id="name starts with dash"),
        pytest.param({"predicates": [{"name": "A1"}, {"name": "A1"}]}, "duplicate", id="duplicate predicate"),
        pytest.param({"predicates": [{"argument": {}}]}, "missing required 'name'", id="predicate without name"),
        pytest.param(
            {
                "predicates": [
                    {
                        "name": "Zone",
                        "argument": {"serviceAffinity": {"labels": ["z"]}, "labelsPresence": {"labels": ["z"]}},
                    }
                ]
            },
            "anyOf",
            id="two v1.9 predicate arguments",
        ),
        pytest.param(
            {"priorities": [{"name": "Spot", "argument": {"labelPreference": {"label": "spot"}, "weight": 2}}]},
            "anyOf",
            id="v1.9 priority argument plus another key",
        ),
        pytest.param(
            {"predicates": [{"name": "Zone", "argument": {}}]}, "properties outside bounds", id="empty argument"
        ),
        pytest.param(
            {"predicates": [{"name": "Zone", "argument": {"labelsPresence": {"presence": True}}}]},
            "missing required 'labels'",
            id="labelsPresence without labels",
        ),
        pytest.param(
            {"extenders": [{"urlPrefix": "https://e", "tlsConfig": {"insecureSkipVerify": True}}]},
            "unknown field",
            id="unknown tlsConfig key",
        ),
        pytest.param({"priorities": [{"name": "EqualPriority", "weight": 0}]}, "minimum", id="weight 0"),
        pytest.param({"priorities": [{"name": "EqualPriority", "weight": 1000001}]}, "maximum", id="weight too big"),
        pytest.param({"priorities": [{"name": "EqualPriority", "weight": True}]}, "expected integer", id="weight bool"),
        pytest.param(
            {
                "priorities": [
                    {
                        "name": "Ratio",
                        "argument": {
                            "requestedToCapacityRatioArguments": {"shape": [{"utilization": 101, "score": 11}]}
                        },
                    }
                ]
            },
            "maximum",
            id="shape out of range",
        ),
        pytest.param(
            {"extenders": [{"filterVerb": "filter"}]}, "missing required 'urlPrefix'", id="extender without url"
        ),
        pytest.param(
            {"extenders": [{"urlPrefix": "http://e", "httpTimeout": 5000000000}]}, "expected string", id="timeout in ns"
        ),
        pytest.param(
            {"extenders": [{"urlPrefix": "http://e", "httpTimeout": "5 sec"}]},
            "does not match",
            id="timeout not a duration",
        ),
        pytest.param({"hardPodAffinitySymmetricWeight": 101}, "maximum", id="symmetric weight"),
        pytest.param({"percentageOfNodesToScore": -1}, "minimum", id="negative percentage"),
        pytest.param({"podInitialBackoffSeconds": 0}, "minimum", id="zero backoff"),
        pytest.param({"alwaysCheckAllPredicates": "yes"}, "expected boolean", id="bool as string"),
        pytest.param({"predicate": []}, "unknown field", id="typo in a field name"),
    ],
)
def test_schema_rejects_nonsense(spec: dict[str, Any], problem: str) -> None:
    found = violations(crd_schema(), policy(**spec))
    assert any(problem in v for v in found), found


def test_schema_accepts_every_field_at_once() -> None:
    # Everything but algorithmProvider, which a CEL rule makes an alternative to the lists.
    everything = policy(
        predicates=[{"name": "RequireSSD", "argument": {"labelsPresence": {"labels": ["ssd"], "presence": True}}}],
        priorities=[
            {"name": "NodeResourcesBalancedAllocation", "argument": {"resources": [{"name": "cpu", "weight": 1}]}},
            {"name": "NodeResourcesFit", "weight": 2, "argument": {"scoringStrategy": {"type": "MostAllocated"}}},
            {
                "name": "Ratio",
                "weight": 3,
                "argument": {
                    "requestedToCapacityRatioArguments": {
                        "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}],
                        "resources": [{"name": "example.com/gpu", "weight": 5}],
                    }
                },
            },
            {"name": "ZoneSpread", "weight": 2, "argument": {"serviceAntiAffinity": {"label": "zone"}}},
            {"name": "AvoidSpot", "weight": 1, "argument": {"labelPreference": {"label": "spot", "presence": False}}},
        ],
        extenders=[
            {
                "urlPrefix": "https://extender.example:8443/scheduler",
                "filterVerb": "filter",
                "prioritizeVerb": "prioritize",
                "bindVerb": "",
                "weight": 5,
                "enableHttps": True,
                "httpTimeout": "1m30s",
                "nodeCacheCapable": True,
                "tlsConfig": {"insecure": False, "serverName": "extender.example", "caData": "aGVsbG8="},
                "ignorable": False,
                "managedResources": [{"name": "example.com/gpu", "ignoredByScheduler": True}],
            }
        ],
        hardPodAffinitySymmetricWeight=10,
        alwaysCheckAllPredicates=True,
        percentageOfNodesToScore=50,
        podInitialBackoffSeconds=1,
        podMaxBackoffSeconds=10,
        parallelism=16,
    )
    everything["status"] = {
        "observedGeneration": 3,
        "activeGeneration": 2,
        "conditions": [
            {
                "type": "Accepted",
                "status": "False",
                "reason": "UnknownPredicate",
                "message": "predicates[0]: unknown name",
                "lastTransitionTime": "2030-01-01T00:00:00Z",
                "observedGeneration": 3,
            }
        ],
    }
    assert violations(crd_schema(), everything) == []


@pytest.mark.parametrize("directory", APPLYABLE, ids=lambda p: str(p.relative_to(ROOT)))
def test_folders_apply_with_kubectl_apply_f(directory: Path) -> None:
    """`kubectl apply -f DIR` reads every .yaml, .yml and .json file of DIR as Kubernetes objects: each must be
    one (tests/cluster/test_operations_e2e.py applies them for real)."""
    files = sorted(p for p in directory.iterdir() if p.suffix in (".yaml", ".yml", ".json"))
    assert files
    for path in files:
        for doc in load_all(path):
            assert doc.get("apiVersion") and doc.get("kind") and doc["kind"] != "Kustomization", path
