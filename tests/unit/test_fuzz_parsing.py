"""Bad input never crashes the readers: hypothesis fuzzing of pod, node, SchedulingPolicy and legacy Policy parsing.

Each test starts from a rich, valid body and damages it at one place hypothesis chooses: a wrong
type, a huge or negative number, a malformed quantity, unicode, an unknown field, deep nesting.
The only outcomes allowed are the documented ones: the object (then a pod must also go through
the scheduling algorithm without raising), or the reader's error value (``ObjectError`` for API
bodies, ``FieldError`` lists for policies) naming the damaged field or one of its parents.

Examples are derandomized so every run is repeatable: 400 a test in CI, 200 elsewhere
(tests/hypothesis_budget.py); ``FUZZ_N=5000`` runs that many random ones instead, to explore further.
"""

from __future__ import annotations

import copy
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from builders import make_node
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from kopf_scheduler.core.config.legacy import import_policy
from kopf_scheduler.core.config.policy import default_profile, validate_policy
from kopf_scheduler.core.model.parsing import (
    ObjectError,
    parse_controller,
    parse_csi_node,
    parse_node,
    parse_persistent_volume,
    parse_persistent_volume_claim,
    parse_pod,
    parse_pod_disruption_budget,
    parse_priority_class,
    parse_service,
    parse_storage_class,
)
from kopf_scheduler.core.model.specs import FieldError
from kopf_scheduler.core.scheduling.algorithm import GenericScheduler
from kopf_scheduler.core.state.cache import SchedulerCache

Path = tuple[str | int, ...]

FUZZ = settings(
    max_examples=int(__import__("os").environ.get("FUZZ_N") or examples(400)),
    derandomize=not __import__("os").environ.get("FUZZ_N"),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

# --------------------------------------------------------------------------- damage

#: quantities Kubernetes refuses, or accepts only at the edges of what a number holds
BAD_QUANTITIES = [
    "",
    " ",
    "-1",
    "-100m",
    "1e400",
    "1e64",
    "1e-64",
    "9" * 40 + "Ei",
    "1.5.5",
    "Mi",
    "1 Gi",
    "NaN",
    "nan",
    "inf",
    "-inf",
    "0x10",
    "１",
    "1e",
    "e3",
    "+",
    ".",
    "5.",
    ".5m",
    "-0",
    "1Ki1",
    "١٢",
    "1\n",
    "\x00",
]
NUMBERS = st.one_of(
    st.integers(),
    st.integers(min_value=2**62, max_value=2**200),
    st.integers(min_value=-(2**200), max_value=-1),
    st.floats(allow_nan=True, allow_infinity=True),
)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=12), st.sampled_from(BAD_QUANTITIES))
GARBAGE = st.recursive(
    SCALARS,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=8,
)


def nested(depth: int) -> Any:
    """A value nested `depth` levels deep (alternating lists and objects): no reader may recurse into it blindly."""
    value: Any = "deep"
    for i in range(depth):
        value = [value] if i % 2 else {"x": value}
    return value


DAMAGE = st.one_of(
    GARBAGE, st.sampled_from(BAD_QUANTITIES), st.builds(nested, st.integers(min_value=50, max_value=900))
)


def paths(value: Any, prefix: Path = ()) -> Iterator[Path]:
    """Every place in a JSON-like value (the root excluded)."""
    if prefix:
        yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from paths(item, (*prefix, i))


def containers_at(value: Any, prefix: Path = ()) -> Iterator[Path]:
    """Every object in a JSON-like value, the root included: where an unknown field can go."""
    if isinstance(value, dict):
        yield prefix
        for key, item in value.items():
            yield from containers_at(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from containers_at(item, (*prefix, i))


def _parent(body: Any, path: Path) -> Any:
    for step in path[:-1]:
        body = body[step]
    return body


def _copy(value: Any) -> Any:
    """A deep copy of a JSON-like value (a quarter of copy.deepcopy's time; anything else goes to deepcopy)."""
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    if value is None or isinstance(value, (str, int, float)):
        return value
    return copy.deepcopy(value)


#: id(base) -> (base, its containers, its places): a base's places, found once, not once per example
_PLACES: dict[int, tuple[Any, list[Path], list[Path]]] = {}


def _places(base: dict[str, Any]) -> tuple[list[Path], list[Path]]:
    found = _PLACES.get(id(base))
    if found is None:  # the entry holds the base itself: its id is never reused while cached
        found = _PLACES[id(base)] = (base, list(containers_at(base)), list(paths(base)))
    return found[1], found[2]


@st.composite
def damaged(draw: st.DrawFn, base: dict[str, Any]) -> tuple[dict[str, Any], Path]:
    """`base` with one place replaced by damage, or one object given an unknown field; and that place."""
    body = _copy(base)
    containers, places = _places(base)  # the same as the copy's
    if draw(st.integers(min_value=0, max_value=4)) == 0:
        where = draw(st.sampled_from(containers))
        target = body
        for step in where:
            target = target[step]
        key = draw(st.text(min_size=1, max_size=10))
        target[key] = draw(DAMAGE)
        return body, (*where, key)
    where = draw(st.sampled_from(places))
    _parent(body, where)[where[-1]] = draw(DAMAGE)
    return body, where


def render(path: Path) -> str:
    """``("spec", "containers", 0, "resources")`` -> ``spec.containers[0].resources``."""
    out = ""
    for step in path:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out


def names_the_place(message: str, path: Path) -> bool:
    """The message names the damaged place or one of its parents (the reader stops where the shape breaks)."""
    return any(render(path[:n]) in message for n in range(len(path), 0, -1))


# --------------------------------------------------------------------------- pods and nodes

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web-0",
        "namespace": "shop",
        "uid": "5f0c1a2e",
        "resourceVersion": "42",
        "labels": {"app": "web", "tier": "front"},
        "annotations": {"note": "fuzzed"},
        "ownerReferences": [{"kind": "ReplicaSet", "name": "web", "uid": "rs-1", "controller": True}],
    },
    "spec": {
        "schedulerName": "kopf-scheduler",
        "priority": 100,
        "preemptionPolicy": "PreemptLowerPriority",
        "nodeSelector": {"disk": "ssd"},
        "containers": [
            {
                "name": "app",
                "image": "web:1",
                "resources": {
                    "requests": {"cpu": "250m", "memory": "256Mi", "example.com/gpu": "1"},
                    "limits": {"cpu": "1", "memory": "1Gi"},
                },
                "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP", "hostIP": "0.0.0.0"}],
            },
            {
                "name": "sidecar",
                "image": "log:1",
                "resources": {"requests": {"cpu": "50m", "ephemeral-storage": "1Gi"}},
            },
        ],
        "initContainers": [
            {"name": "init", "image": "busybox", "resources": {"requests": {"cpu": "500m"}}},
            {
                "name": "proxy",
                "image": "proxy",
                "restartPolicy": "Always",
                "resources": {"requests": {"memory": "64Mi"}},
            },
        ],
        "overhead": {"cpu": "10m", "memory": "8Mi"},
        "resources": {"requests": {"cpu": "2", "memory": "2Gi"}, "limits": {"cpu": "4"}},
        "tolerations": [
            {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"},
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
                        {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]},
                    ]
                },
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 10,
                        "preference": {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}]},
                    }
                ],
            },
            "podAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "cache"}}, "topologyKey": "zone", "namespaces": ["shop"]}
                ]
            },
            "podAntiAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": 50,
                        "podAffinityTerm": {
                            "labelSelector": {
                                "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]
                            },
                            "topologyKey": "kubernetes.io/hostname",
                            "namespaceSelector": {"matchLabels": {"team": "shop"}},
                        },
                    }
                ]
            },
        },
        "topologySpreadConstraints": [
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "minDomains": 2,
                "matchLabelKeys": ["pod-template-hash"],
                "nodeAffinityPolicy": "Honor",
                "nodeTaintsPolicy": "Ignore",
            }
        ],
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-web-0", "readOnly": False}},
            {"name": "disk", "gcePersistentDisk": {"pdName": "pd-1"}},
            {"name": "ceph", "rbd": {"pool": "p", "image": "i", "monitors": ["m1"]}},
            {"name": "tmp", "emptyDir": {}},
        ],
        "schedulingGates": [],
    },
    "status": {
        "phase": "Pending",
        "startTime": "2026-01-02T03:04:05Z",
        "nominatedNodeName": "n1",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        "containerStatuses": [
            {
                "name": "app",
                "allocatedResources": {"cpu": "250m"},
                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}},
            }
        ],
        "allocatedResources": {"cpu": "2"},
        "resources": {"requests": {"cpu": "2"}},
    },
}

NODE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "n1",
        "uid": "node-uid",
        "labels": {"zone": "a", "disk": "ssd", "gen": "5"},
        "annotations": {"a": "b"},
    },
    "spec": {"taints": [{"key": "dedicated", "value": "web", "effect": "NoSchedule"}], "unschedulable": False},
    "status": {
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi", "example.com/gpu": "2"},
        "allocatable": {
            "cpu": "7800m",
            "memory": "31Gi",
            "pods": "110",
            "ephemeral-storage": "90Gi",
            "example.com/gpu": "2",
        },
        "conditions": [{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}],
        "images": [{"names": ["web:1"], "sizeBytes": 123456789}],
    },
}

NODES = [
    make_node(f"n{i}").capacity(cpu="8", memory="32Gi", pods="110").label(zone="ab"[i % 2], disk="ssd", gen="5").obj()
    for i in range(4)
]


#: upstream's default profile, built once as the operator builds a policy's profile once for all its pods (building
#: it took a quarter of each example); every example gets a scheduler and a cache of its own
PROFILE = default_profile("kopf-scheduler")


def schedule(pod: Any) -> None:
    """The algorithm must decide for any pod the parser accepted: a placement or a message, never an exception."""
    cache = SchedulerCache()
    for node in NODES:
        cache.add_node(node)
    result = GenericScheduler(PROFILE).schedule(pod, cache.snapshot(), rng=random.Random(0))
    assert result.node is not None or result.message or result.error is not None


def test_the_base_bodies_are_valid() -> None:
    schedule(parse_pod(POD))
    assert parse_node(NODE).allocatable.milli_cpu == 7800
    for parse, body in OTHERS:
        parse(body)


@FUZZ
@given(damaged(POD))
def test_a_damaged_pod_is_read_or_refused_naming_the_field(case: tuple[dict[str, Any], Path]) -> None:
    body, where = case
    try:
        pod = parse_pod(body)
    except ObjectError as exc:
        assert names_the_place(str(exc), where), f"{render(where)} not named in: {exc}"
        return
    schedule(pod)


@FUZZ
@given(damaged(NODE))
def test_a_damaged_node_is_read_or_refused_naming_the_field(case: tuple[dict[str, Any], Path]) -> None:
    body, where = case
    try:
        node = parse_node(body)
    except ObjectError as exc:
        assert names_the_place(str(exc), where), f"{render(where)} not named in: {exc}"
        return
    cache = SchedulerCache()
    cache.add_node(node)
    schedule_pod = parse_pod(
        {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    )
    GenericScheduler(PROFILE).schedule(schedule_pod, cache.snapshot(), rng=random.Random(0))


@FUZZ
@given(
    st.sampled_from(["cpu", "memory", "ephemeral-storage", "example.com/gpu", "hugepages-2Mi", "pods"]),
    st.one_of(st.sampled_from(BAD_QUANTITIES), SCALARS),
)
def test_a_malformed_quantity_is_refused_naming_the_resource(resource: str, quantity: Any) -> None:
    body = {
        "metadata": {"name": "q"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {resource: quantity}}}]},
    }
    try:
        pod = parse_pod(body)
    except ObjectError as exc:
        assert f"spec.containers[0].resources.requests.{resource}" in str(exc) or resource in str(exc), str(exc)
        return
    schedule(pod)


@pytest.mark.parametrize(
    "requests,problem",
    [
        pytest.param(
            {"cpu": "-1"},
            "requests.cpu: must be greater than or equal to 0",
            id="a negative request (the API server's words)",
        ),
        pytest.param(
            {"memory": "9223372036854775808"},
            "requests.memory: must be at most 9223372036854775807",
            id="one past int64",
        ),
        pytest.param(
            {"cpu": "9223372036854775807"}, "requests.cpu: must be at most", id="int64 cores are too many millicores"
        ),
        pytest.param(
            {"cpu": float("nan")}, "requests.cpu: quantity must be a finite number", id="NaN from a YAML .nan"
        ),
        pytest.param({"memory": "1e65"}, "quantity exponent out of range", id="exponent past 64"),
    ],
)
def test_amounts_outside_int64_are_refused(requests: dict[str, Any], problem: str) -> None:
    with pytest.raises(ObjectError, match=re.escape(problem)):
        parse_pod(
            {"metadata": {"name": "q"}, "spec": {"containers": [{"name": "c", "resources": {"requests": requests}}]}}
        )


def test_a_pod_whose_containers_together_pass_int64_is_refused() -> None:
    # 9e15 cores = 9e18 millicores each (int64 holds 9.22e18); two of them do not fit
    container = {"name": "c", "resources": {"requests": {"cpu": "9000000000000000"}}}
    body = {"metadata": {"name": "q"}, "spec": {"containers": [container, {**container, "name": "d"}]}}
    with pytest.raises(ObjectError, match=r"spec\.containers: the pod's total request of cpu must be at most"):
        parse_pod(body)


def test_a_node_whose_pods_together_pass_int64_stays_usable() -> None:
    # bound pods of another scheduler are counted whatever they ask: three of 9e18 millicores saturate
    # the node's int64 columns instead of crashing every snapshot
    cache = SchedulerCache()
    cache.add_node(NODES[0])
    for i in range(3):
        cache.add_pod(parse_pod({
            "metadata": {"name": f"hog-{i}", "uid": f"hog-{i}"},
            "spec": {"nodeName": NODES[0].name, "containers": [
                {"name": "c", "resources": {"requests": {"cpu": "9000000000000000", "example.com/x": "9E"}}},
            ]},
        }))  # fmt: skip
    pod = parse_pod(
        {
            "metadata": {"name": "p", "uid": "p"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1", "example.com/x": "1"}}}]},
        }
    )
    result = GenericScheduler(default_profile("kopf-scheduler")).schedule(pod, cache.snapshot(), rng=random.Random(0))
    assert result.node is None and result.error is None
    assert "Insufficient cpu" in result.message and "Insufficient example.com/x" in result.message


OTHERS: list[tuple[Callable[[Any], Any], dict[str, Any]]] = [
    (parse_persistent_volume, {
        "metadata": {"name": "pv", "labels": {"zone": "a"}},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                 "csi": {"driver": "d", "volumeHandle": "h"}, "claimRef": {"namespace": "ns", "name": "c"},
                 "nodeAffinity": {"required": {"nodeSelectorTerms": [
                     {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                 ]}}},
        "status": {"phase": "Bound"},
    }),
    (parse_persistent_volume_claim, {
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {"volumeName": "pv", "storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
                 "resources": {"requests": {"storage": "1Gi"}}, "selector": {"matchLabels": {"a": "b"}}},
        "status": {"phase": "Bound"},
    }),
    (parse_storage_class, {
        "metadata": {"name": "fast"}, "provisioner": "p", "volumeBindingMode": "WaitForFirstConsumer",
        "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": ["a", "b"]}]}],
    }),
    (parse_service, {"metadata": {"name": "s", "namespace": "ns"}, "spec": {"selector": {"app": "web"}}}),
    (parse_controller, {
        "kind": "ReplicaSet", "metadata": {"name": "rs", "namespace": "ns", "uid": "u"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
    }),
    (parse_controller, {
        "kind": "ReplicationController", "metadata": {"name": "rc", "namespace": "ns"},
        "spec": {"selector": {"app": "web"}},
    }),
    (parse_pod_disruption_budget, {
        "metadata": {"name": "pdb", "namespace": "ns"}, "spec": {"selector": {"matchLabels": {"app": "web"}}},
        "status": {"disruptionsAllowed": 1, "disruptedPods": {"web-0": "2026-01-01T00:00:00Z"}},
    }),
    (parse_priority_class, {
        "metadata": {"name": "high"}, "value": 1000, "globalDefault": False, "preemptionPolicy": "Never",
    }),
    (parse_csi_node, {
        "metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "ebs", "allocatable": {"count": 25}}]},
    }),
]  # fmt: skip


@FUZZ
@given(st.sampled_from(range(len(OTHERS))).flatmap(lambda i: st.tuples(st.just(i), damaged(OTHERS[i][1]))))
def test_the_other_kinds_are_read_or_refused_naming_the_field(case: tuple[int, tuple[dict[str, Any], Path]]) -> None:
    i, (body, where) = case
    parse = OTHERS[i][0]
    try:
        parse(body)
    except ObjectError as exc:
        assert names_the_place(str(exc), where), f"{render(where)} not named in: {exc}"


# --------------------------------------------------------------------------- policies

POLICY: dict[str, Any] = {
    "schedulerName": "kopf-fuzz",
    "predicates": [
        {"name": "GeneralPredicates"},
        {"name": "PodToleratesNodeTaints"},
        {"name": "MatchInterPodAffinity"},
        {"name": "Labels", "argument": {"labelsPresence": {"labels": ["disk"], "presence": True}}},
        {"name": "NodeAffinity"},
    ],
    "priorities": [
        {"name": "LeastRequestedPriority", "weight": 1,
         "argument": {"resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}]}},
        {"name": "BalancedResourceAllocation", "weight": 1},
        {"name": "Ratio", "weight": 2, "argument": {"requestedToCapacityRatioArguments": {
            "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}],
            "resources": [{"name": "cpu", "weight": 1}],
        }}},
        {"name": "PreferSSD", "weight": 3, "argument": {"labelPreference": {"label": "disk", "presence": True}}},
        {"name": "InterPodAffinityPriority", "weight": 1},
        {"name": "PodTopologySpread", "weight": 2},
    ],
    "extenders": [
        {
            "urlPrefix": "https://extender.example:8443/scheduler",
            "filterVerb": "filter",
            "prioritizeVerb": "prioritize",
            "weight": 5,
            "httpTimeout": "5s",
            "nodeCacheCapable": True,
            "ignorable": True,
            "managedResources": [{"name": "example.com/gpu", "ignoredByScheduler": True}],
            "tlsConfig": {"serverName": "extender", "insecure": True},
        }
    ],
    "hardPodAffinitySymmetricWeight": 10,
    "alwaysCheckAllPredicates": False,
    "percentageOfNodesToScore": 50,
    "podInitialBackoffSeconds": 1,
    "podMaxBackoffSeconds": 10,
    "parallelism": 16,
    "preemption": True,
}  # fmt: skip

LEGACY: dict[str, Any] = {
    "kind": "Policy",
    "apiVersion": "v1",
    "predicates": [
        {"name": "GeneralPredicates"},
        {"name": "Region", "argument": {"serviceAffinity": {"labels": ["region"]}}},
        {"name": "Labels", "argument": {"labelsPresence": {"labels": ["disk"], "presence": True}}},
    ],
    "priorities": [
        {"name": "LeastRequestedPriority", "weight": 1},
        {"name": "Zone", "weight": 2, "argument": {"serviceAntiAffinity": {"label": "zone"}}},
        {"name": "PreferInfra", "weight": 1, "argument": {"labelPreference": {"label": "infra", "presence": False}}},
        {"name": "Ratio", "weight": 1, "argument": {"requestedToCapacityRatioArguments": {
            "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}],
            "resources": [{"name": "memory", "weight": 1}],
        }}},
    ],
    "extenders": [
        {"urlPrefix": "http://127.0.0.1:12346/scheduler", "filterVerb": "filter", "weight": 5, "enableHttps": False,
         "httpTimeout": 5000000000, "nodeCacheCapable": False,
         "managedResources": [{"name": "example.com/foo", "ignoredByScheduler": True}]}
    ],
    "hardPodAffinitySymmetricWeight": 10,
    "alwaysCheckAllPredicates": False,
}  # fmt: skip


def anchor(where: Path) -> Path:
    """Where an error about damage at `where` may point: the list item that holds it (a custom
    priority's ``name`` is what is reported when its ``argument`` broke), else the place itself."""
    for i, step in enumerate(where):
        if isinstance(step, int):
            return where[: i + 1]
    return where


def check_field_errors(errors: list[FieldError], where: Path, *, root: str) -> None:
    """Every error has a path and a message; one is at the damaged place, inside it, at a parent,
    or elsewhere in the same list item."""
    assert errors, "a rejection without errors"
    for error in errors:
        assert isinstance(error, FieldError) and error.message, error
        assert error.path.startswith(root), f"{error} is not under {root!r}"
    place, around = render(where), render(anchor(where))
    related = [e for e in errors if e.path.startswith(around) or place.startswith(e.path)]
    assert related, f"none of {[str(e) for e in errors]} is at or around {place}"


def test_the_base_policies_are_valid() -> None:
    assert not isinstance(validate_policy(POLICY), list), validate_policy(POLICY)
    assert not isinstance(import_policy(LEGACY), list), import_policy(LEGACY)


@FUZZ
@given(damaged(POLICY))
def test_a_damaged_scheduling_policy_is_accepted_or_rejected_field_by_field(case: tuple[dict[str, Any], Path]) -> None:
    spec, where = case
    result = validate_policy(spec)
    if isinstance(result, list):
        check_field_errors(result, ("spec", *where), root="spec")


@FUZZ
@given(damaged(LEGACY))
def test_a_damaged_legacy_policy_is_imported_or_rejected_field_by_field(case: tuple[dict[str, Any], Path]) -> None:
    doc, where = case
    result = import_policy(doc)
    if isinstance(result, list):
        check_field_errors(result, where, root="")


@FUZZ
@given(st.one_of(GARBAGE, st.text(), st.binary(max_size=64)))
def test_any_legacy_document_is_imported_or_rejected(doc: Any) -> None:
    result = import_policy(doc if isinstance(doc, (str, bytes, dict)) else {"predicates": doc})
    if isinstance(result, list):
        assert all(isinstance(e, FieldError) and e.message for e in result)
