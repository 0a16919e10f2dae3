"""Importing v1.9 Policy files (and their ConfigMap) into SchedulingPolicy specs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kopf_scheduler.core.config.legacy import format_duration_ns, import_policy, to_manifest
from kopf_scheduler.core.config.policy import FieldError, validate_policy
from kopf_scheduler.core.config.profile import Profile

FIXTURE = Path(__file__).parent / "fixtures" / "legacy" / "openshift-scheduler.json"


def imported(doc: Any, **kw: Any) -> dict[str, Any]:
    result = import_policy(doc, **kw)
    assert isinstance(result, dict), result
    return result


def import_errors(doc: Any) -> dict[str, str]:
    result = import_policy(doc)
    assert isinstance(result, list), result
    assert all(isinstance(e, FieldError) for e in result)
    return {e.path: e.message for e in result}


def test_openshift_scheduler_json() -> None:
    spec = imported(FIXTURE.read_text(), scheduler_name="openshift")
    assert spec["schedulerName"] == "openshift"
    assert spec["predicates"][-1] == {"name": "Region", "argument": {"serviceAffinity": {"labels": ["region"]}}}
    assert spec["priorities"][-2] == {
        "name": "Zone",
        "weight": 2,
        "argument": {"serviceAntiAffinity": {"label": "zone"}},
    }
    assert spec["extenders"][0]["httpTimeout"] == "10s"
    assert spec["hardPodAffinitySymmetricWeight"] == 10
    profile = validate_policy(spec)
    assert isinstance(profile, Profile)
    assert profile.filter_names == [
        "CheckNodeCondition", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
        "VolumeRestrictions", "Region", "EBSLimits", "GCEPDLimits", "AzureDiskLimits", "VolumeBinding", "VolumeZone",
        "CheckNodeMemoryPressure", "CheckNodeDiskPressure", "PodTopologySpread", "InterPodAffinity",
    ]  # fmt: skip
    weights = dict(profile.score_names)
    assert weights["Zone"] == 2 and weights["PreferInfra"] == 1 and weights["NodePreferAvoidPods"] == 10000
    assert profile.extenders[0].http_timeout_seconds == 10.0 and profile.extenders[0].weight == 5
    ipa = next(p for p in profile.filters if p.name == "InterPodAffinity")
    assert ipa.args.hard_pod_affinity_weight == 10


def test_round_trip_spec_is_stable() -> None:
    """import -> manifest -> YAML -> spec -> validate gives the same profile; normalised specs are fixed points."""
    spec = imported(json.loads(FIXTURE.read_text()))
    manifest = to_manifest(spec, name="openshift")
    assert manifest["apiVersion"] == "scheduling.kopf.dev/v1alpha1" and manifest["kind"] == "SchedulingPolicy"
    again = yaml.safe_load(yaml.safe_dump(manifest))["spec"]
    a, b = validate_policy(spec), validate_policy(again)
    assert isinstance(a, Profile) and isinstance(b, Profile)
    assert a.filter_names == b.filter_names and a.score_names == b.score_names
    c = validate_policy(dict(a.spec))
    assert isinstance(c, Profile) and c.spec == a.spec


def test_configmap_wrapper() -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "scheduler-policy", "namespace": "kube-system"},
          "data": {"policy.cfg": FIXTURE.read_text()}}  # fmt: skip
    assert imported(cm) == imported(FIXTURE.read_text())


def test_configmap_errors_point_inside_policy_cfg() -> None:
    cm = {
        "kind": "ConfigMap",
        "data": {"policy.cfg": json.dumps({"kind": "Policy", "predicates": [{"name": "PodFitResources"}]})},
    }
    assert import_errors(cm) == {
        "data[policy.cfg].predicates[0].name": "unknown predicate 'PodFitResources'; did you mean 'PodFitsResources'?"
    }


def test_configmap_without_policy_cfg() -> None:
    assert import_errors({"kind": "ConfigMap", "data": {"other": "x"}}) == {
        "data": "the ConfigMap has no 'policy.cfg' key"
    }


def test_yaml_text() -> None:
    text = (
        "kind: Policy\napiVersion: v1\n"
        "predicates:\n- name: PodFitsResources\n"
        "priorities:\n- name: LeastRequestedPriority\n  weight: 2\n"
    )
    assert imported(text) == {"schedulerName": "default-scheduler", "predicates": [{"name": "PodFitsResources"}],
                              "priorities": [{"name": "LeastRequestedPriority", "weight": 2}]}  # fmt: skip


@pytest.mark.parametrize(
    "extender,expected",
    [
        pytest.param(
            {"urlPrefix": "http://u", "BindVerb": "bind"},
            {"urlPrefix": "http://u", "bindVerb": "bind"},
            id="v1.9 BindVerb",
        ),
        pytest.param(
            {"urlPrefix": "http://u", "bindVerb": "bind"},
            {"urlPrefix": "http://u", "bindVerb": "bind"},
            id="v1.10 bindVerb",
        ),
        pytest.param(
            {"URLPrefix": "http://u", "FilterVerb": "f"},
            {"urlPrefix": "http://u", "filterVerb": "f"},
            id="go case-insensitive keys",
        ),
        pytest.param(
            {"urlPrefix": "http://u", "httpTimeout": 500_000_000},
            {"urlPrefix": "http://u", "httpTimeout": "500ms"},
            id="timeout ns",
        ),
        pytest.param(
            {
                "urlPrefix": "http://u",
                "managedResources": [{"name": "x/y", "ignoredByScheduler": True}],
                "ignorable": True,
            },
            {
                "urlPrefix": "http://u",
                "managedResources": [{"name": "x/y", "ignoredByScheduler": True}],
                "ignorable": True,
            },
            id="managed",
        ),
        pytest.param(
            {"urlPrefix": "https://u", "tlsConfig": {"Insecure": True}},
            {"urlPrefix": "https://u", "tlsConfig": {"insecure": True}},
            id="tls",
        ),
    ],
)
def test_extender_keys(extender: dict[str, Any], expected: dict[str, Any]) -> None:
    spec = imported({"kind": "Policy", "apiVersion": "v1", "predicates": [], "extenders": [extender]})
    assert spec["extenders"] == [expected]


@pytest.mark.parametrize(
    "doc,path,message",
    [
        pytest.param(
            {"kind": "Policy", "predicats": []},
            "predicats",
            "unknown field; did you mean 'predicates'?",
            id="unknown key",
        ),
        pytest.param(
            {"kind": "Policy", "schedulerName": "x"},
            "schedulerName",
            "unknown field (allowed: kind, apiVersion, predicates, priorities, extenders, "
            "hardPodAffinitySymmetricWeight, alwaysCheckAllPredicates)",
            id="spec key is not a policy key",
        ),
        pytest.param(
            {"kind": "KubeSchedulerConfiguration"},
            "kind",
            "a KubeSchedulerConfiguration is not a v1.9 Policy: "
            "`kopf-scheduler config import` translates it (core/config/scheduler_config.py)",
            id="kind KubeSchedulerConfiguration",
        ),
        pytest.param(
            {"kind": "Config"},
            "kind",
            "must be 'Policy', got 'Config'",
            id="kind",
        ),
        pytest.param({"kind": "Policy", "apiVersion": "v2"}, "apiVersion", "must be 'v1', got 'v2'", id="apiVersion"),
        pytest.param(
            {"kind": "Policy", "extenders": [{"urlPrefix": "u", "httpTimeout": "5s"}]},
            "extenders[0].httpTimeout",
            "must be a positive number of nanoseconds (v1.9 JSON), got '5s'",
            id="timeout not ns",
        ),
        pytest.param(
            {"kind": "Policy", "predicates": [{"name": "X1", "argument": {"labelsPresence": {"label": ["a"]}}}]},
            "predicates[0].argument.labelsPresence.label",
            "unknown field; did you mean 'labels'?",
            id="argument field",
        ),
        pytest.param(
            {
                "kind": "Policy",
                "priorities": [{"name": "Zone", "weight": 0, "argument": {"serviceAntiAffinity": {"label": "zone"}}}],
            },
            "priorities[0].weight",
            "must be an integer from 1 to 1000000, got 0",
            id="weight 0 from validation",
        ),
        pytest.param(
            {"kind": "Policy", "predicates": [{"name": "Custom1"}]},
            "predicates[0].name",
            "unknown predicate 'Custom1': no plugin of that name is installed",
            id="custom without argument",
        ),
    ],
)
def test_import_errors(doc: dict[str, Any], path: str, message: str) -> None:
    assert import_errors(doc)[path].startswith(message)


def test_requested_to_capacity_ratio_arguments() -> None:
    shape = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]
    doc = {
        "kind": "Policy",
        "priorities": [
            {"name": "Ratio", "weight": 2, "argument": {"requestedToCapacityRatioArguments": {"shape": shape}}}
        ],
    }
    spec = imported(doc)
    assert spec["priorities"] == [
        {"name": "Ratio", "weight": 2, "argument": {"requestedToCapacityRatioArguments": {"shape": shape}}}
    ]


def test_requested_to_capacity_ratio_error_paths() -> None:
    shape = [{"utilization": 0, "score": 11}]
    doc = {
        "kind": "Policy",
        "priorities": [
            {"name": "Ratio", "weight": 2, "argument": {"requestedToCapacityRatioArguments": {"shape": shape}}}
        ],
    }
    assert import_errors(doc) == {
        "priorities[0].argument.requestedToCapacityRatioArguments.shape[0].score": "not in valid range [0, 10]"
    }


def test_not_json_or_yaml() -> None:
    errs = import_errors("{ not: [valid")
    assert list(errs) == [""] and "not valid JSON or YAML" in errs[""]


def test_zero_hard_pod_affinity_weight_means_unset() -> None:
    spec = imported({"kind": "Policy", "hardPodAffinitySymmetricWeight": 0})
    assert "hardPodAffinitySymmetricWeight" not in spec


def test_policy_without_lists_uses_default_provider() -> None:
    spec = imported({"kind": "Policy", "apiVersion": "v1"})
    p = validate_policy(spec)
    assert isinstance(p, Profile) and p.source == "DefaultProvider"


@pytest.mark.parametrize(
    "ns,text",
    [(5_000_000_000, "5s"), (90_000_000_000, "90s"), (60_000_000_000, "1m"), (1_500, "1500ns"), (2_000, "2us")],
)
def test_format_duration_ns(ns: int, text: str) -> None:
    assert format_duration_ns(ns) == text


def test_openshift_fixture_with_real_plugins() -> None:
    spec = imported(FIXTURE.read_text())
    assert isinstance(validate_policy(spec), Profile)


# ----------------------------------------------------------------------------- the shipped examples

POLICIES = Path(__file__).parents[2] / "deploy" / "policies"


@pytest.mark.parametrize("path", sorted(p.name for p in POLICIES.glob("*.yaml") if p.name != "kustomization.yaml"))
def test_example_policies_validate(path: str) -> None:
    manifest = yaml.safe_load((POLICIES / path).read_text())
    assert isinstance(validate_policy(manifest["spec"]), Profile)


def test_legacy_imported_example_is_the_import_of_its_policy_file() -> None:
    text = (POLICIES / "legacy-imported.yaml").read_text()
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.rstrip().endswith("was:")) + 2
    end = next(i for i in range(start, len(lines)) if lines[i].strip() == "#")
    original = "\n".join(line[1:] for line in lines[start:end])
    manifest = yaml.safe_load(text)
    spec = imported(original, scheduler_name=manifest["spec"]["schedulerName"])
    assert spec == manifest["spec"]
    assert to_manifest(spec, name=manifest["metadata"]["name"]) == manifest
