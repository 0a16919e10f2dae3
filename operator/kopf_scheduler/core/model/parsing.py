"""API bodies -> core objects: ``parse_pod``, ``parse_node`` and the other kinds the scheduler reads.

Each takes the plain dict the API server returns (or a YAML file holds) and returns a frozen
object of ``core/model/objects.py``, with only the fields scheduling needs and quantities parsed
exactly. A malformed body raises ``ObjectError`` naming the field path; callers at the edge (the
operator's ``kube/convert.py``, the simulator's loader) turn that into an event or a message and
carry on. Pod requests are computed here once, as upstream's resource helpers compute them
(pod-level resources, sidecars, in-place resize; see ``_pod_resources``).

Nodes and unbound pods also keep their ``source``: the body as read, without
``metadata.managedFields`` (as upstream's informers trim it), because HTTP extenders are sent the
API objects themselves. It is shared, never mutated.

A bound pod (``spec.nodeName`` set) is read only for what the cache and the plugins read of the
pods already on nodes: identity, labels, owners, priority, requests, host ports, affinity terms,
volumes, start time. Its node selector, tolerations, spread constraints, scheduling gates,
nomination, limits, container-level scoring requests and body stay at their defaults (they matter
only to a pod being scheduled, and bound pods are most pods: every bind is read once more).

Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Mapping
from typing import Any, Final

from .fields import ObjectError as ObjectError  # re-exported: where callers have always found it
from .fields import integer, list_at, object_at, without_managed_fields
from .objects import (
    ANNOTATION_SELECTED_NODE,
    CONDITION_DISRUPTION_TARGET,
    CONDITION_POD_GROUP_INITIALLY_SCHEDULED,
    CONDITION_POD_SCHEDULED,
    COSCHEDULING_API,
    EMPTY_LABELS,
    NO_POD_CLAIMS,
    NO_SCHEDULE,
    PREEMPT_LOWER_PRIORITY,
    WORKLOAD_API,
    Affinity,
    Container,
    ContainerPort,
    Controller,
    CSIDriver,
    CSINode,
    CSIStorageCapacity,
    ImageState,
    LabelSelector,
    LabelSelectorRequirement,
    Node,
    NodeAffinity,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    OwnerReference,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodAffinity,
    PodAffinityTerm,
    PodClaims,
    PodDisruptionBudget,
    PodGroup,
    PodResourceClaim,
    PreferredSchedulingTerm,
    PriorityClass,
    Service,
    StorageClass,
    Taint,
    Toleration,
    TopologySpreadConstraint,
    Volume,
    WeightedPodAffinityTerm,
)
from .resources import (
    CPU,
    MEMORY,
    ContainerResources,
    PodResources,
    QuantityError,
    ResourceList,
    Resources,
    check_amount,
    is_pod_level_resource,
    non_missing_defaults,
    parse_resource_list,
    pod_requests,
    to_resources,
    to_units,
)
from .timestamps import parse_time


def _str_map(body: Mapping[str, Any], key: str, where: str) -> Mapping[str, str]:
    raw = object_at(body, key, where)
    if not raw:
        return EMPTY_LABELS
    return {str(k): "" if v is None else str(v) for k, v in raw.items()}


def _amount(value: Any, where: str) -> int:
    """An integer in 0..MAX_AMOUNT (a size in bytes, a count)."""
    amount = integer(value, where)
    try:
        return check_amount(amount)
    except QuantityError as exc:
        raise ObjectError(f"{where}: {exc}") from None


def _optional_str(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ObjectError(f"{where}: expected a string, got {value!r}")
    return value


def _time(value: Any, where: str) -> float | None:
    """An RFC 3339 time as seconds since the epoch; None when absent."""
    if value is None or value == "":
        return None
    try:
        moment = parse_time(str(value))
    except ValueError:
        raise ObjectError(f"{where}: expected an RFC 3339 time, got {value!r}") from None
    return None if moment is None else moment.timestamp()


def _resources(raw: Any, where: str) -> Resources:
    if raw is not None and not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected a mapping of resource names to quantities")
    try:
        return Resources.from_mapping(raw, where=where)
    except QuantityError as exc:
        raise ObjectError(str(exc)) from None


def parse_label_selector(raw: Any, where: str) -> LabelSelector | None:
    """``None`` for an absent selector (matches nothing); an empty dict matches everything."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected a label selector object")
    exprs = []
    for i, e in enumerate(list_at(raw, "matchExpressions", where)):
        w = f"{where}.matchExpressions[{i}]"
        if not isinstance(e, Mapping) or "key" not in e:
            raise ObjectError(f"{w}: expected {{key, operator, values}}")
        op = str(e.get("operator", ""))
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ObjectError(f"{w}.operator: {op!r} is not a valid label selector operator")
        exprs.append(LabelSelectorRequirement(str(e["key"]), op, frozenset(str(v) for v in list_at(e, "values", w))))
    return LabelSelector(_str_map(raw, "matchLabels", where), tuple(exprs))


def _node_selector_requirements(raw: list[Any], where: str) -> tuple[NodeSelectorRequirement, ...]:
    out = []
    for i, e in enumerate(raw):
        w = f"{where}[{i}]"
        if not isinstance(e, Mapping) or "key" not in e:
            raise ObjectError(f"{w}: expected {{key, operator, values}}")
        op = str(e.get("operator", ""))
        if op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
            raise ObjectError(f"{w}.operator: {op!r} is not a valid node selector operator")
        out.append(NodeSelectorRequirement(str(e["key"]), op, tuple(str(v) for v in list_at(e, "values", w))))
    return tuple(out)


def parse_node_selector_term(raw: Any, where: str) -> NodeSelectorTerm:
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected a node selector term")
    return NodeSelectorTerm(
        _node_selector_requirements(list_at(raw, "matchExpressions", where), f"{where}.matchExpressions"),
        _node_selector_requirements(list_at(raw, "matchFields", where), f"{where}.matchFields"),
    )


def _pod_affinity_term(raw: Any, where: str) -> PodAffinityTerm:
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected a pod affinity term")
    ns_sel = raw.get("namespaceSelector")
    return PodAffinityTerm(
        label_selector=parse_label_selector(raw.get("labelSelector"), f"{where}.labelSelector"),
        topology_key=str(raw.get("topologyKey") or ""),
        namespaces=frozenset(str(n) for n in list_at(raw, "namespaces", where)),
        namespace_selector=parse_label_selector(ns_sel, f"{where}.namespaceSelector") if ns_sel is not None else None,
    )


def _pod_affinity(raw: Any, where: str) -> PodAffinity | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected an object")
    req_key = "requiredDuringSchedulingIgnoredDuringExecution"
    pref_key = "preferredDuringSchedulingIgnoredDuringExecution"
    required = tuple(
        _pod_affinity_term(t, f"{where}.{req_key}[{i}]") for i, t in enumerate(list_at(raw, req_key, where))
    )
    preferred = []
    for i, t in enumerate(list_at(raw, pref_key, where)):
        w = f"{where}.{pref_key}[{i}]"
        if not isinstance(t, Mapping):
            raise ObjectError(f"{w}: expected {{weight, podAffinityTerm}}")
        preferred.append(
            WeightedPodAffinityTerm(
                integer(t.get("weight"), f"{w}.weight"),
                _pod_affinity_term(t.get("podAffinityTerm"), f"{w}.podAffinityTerm"),
            )
        )
    return PodAffinity(required, tuple(preferred))


def parse_affinity(raw: Any, where: str = "spec.affinity") -> Affinity | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected an object")
    node_aff = None
    na = raw.get("nodeAffinity")
    if na is not None:
        if not isinstance(na, Mapping):
            raise ObjectError(f"{where}.nodeAffinity: expected an object")
        w = f"{where}.nodeAffinity"
        req_key = "requiredDuringSchedulingIgnoredDuringExecution"
        required: tuple[NodeSelectorTerm, ...] | None = None
        if na.get(req_key) is not None:
            req = object_at(na, req_key, w)
            required = tuple(
                parse_node_selector_term(t, f"{w}.{req_key}.nodeSelectorTerms[{i}]")
                for i, t in enumerate(list_at(req, "nodeSelectorTerms", f"{w}.{req_key}"))
            )
        pref_key = "preferredDuringSchedulingIgnoredDuringExecution"
        preferred = []
        for i, t in enumerate(list_at(na, pref_key, w)):
            pw = f"{w}.{pref_key}[{i}]"
            if not isinstance(t, Mapping):
                raise ObjectError(f"{pw}: expected {{weight, preference}}")
            preferred.append(
                PreferredSchedulingTerm(
                    integer(t.get("weight"), f"{pw}.weight"),
                    parse_node_selector_term(t.get("preference") or {}, f"{pw}.preference"),
                )
            )
        node_aff = NodeAffinity(required, tuple(preferred))
    return Affinity(
        node_aff,
        _pod_affinity(raw.get("podAffinity"), f"{where}.podAffinity"),
        _pod_affinity(raw.get("podAntiAffinity"), f"{where}.podAntiAffinity"),
    )


def _resource_list(raw: Any, where: str) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected a mapping of resource names to quantities")
    try:
        return parse_resource_list(raw, where=where)
    except QuantityError as exc:
        raise ObjectError(str(exc)) from None


def _container(raw: Any, where: str, *, init: bool) -> tuple[Container, dict[str, int], dict[str, int]]:
    """The container, and its request and limit lists (names kept, for the presence rules of ``PodRequests``)."""
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected a container object")
    res = object_at(raw, "resources", where)
    request_list = _resource_list(res.get("requests"), f"{where}.resources.requests")
    limit_list = _resource_list(res.get("limits"), f"{where}.resources.limits")
    # Kubernetes defaults requests to limits when only limits are given.
    for name, amount in limit_list.items():
        request_list.setdefault(name, amount)
    ports = []
    for i, p in enumerate(list_at(raw, "ports", where)):
        w = f"{where}.ports[{i}]"
        if not isinstance(p, Mapping):
            raise ObjectError(f"{w}: expected a port object")
        host_port = integer(p.get("hostPort"), f"{w}.hostPort")
        if host_port <= 0:
            continue
        ports.append(
            ContainerPort(
                host_port=host_port,
                container_port=integer(p.get("containerPort"), f"{w}.containerPort"),
                protocol=str(p.get("protocol") or "TCP"),
                host_ip=str(p.get("hostIP") or "0.0.0.0"),
            )
        )
    container = Container(
        name=str(raw.get("name") or ""),
        image=str(raw.get("image") or ""),
        requests=to_resources(request_list),
        limits=to_resources(limit_list),
        ports=tuple(ports),
        restartable=init and raw.get("restartPolicy") == "Always",
        request_names=tuple(sorted(request_list)),
    )
    return container, request_list, limit_list


def _status_lists(status: Mapping[str, Any], where: str) -> dict[str, tuple[ResourceList | None, ResourceList | None]]:
    """Container name -> (allocatedResources, resources.requests) from the container statuses.

    Upstream ``findContainerStatus`` looks in ``containerStatuses`` first, then ``initContainerStatuses``.
    """
    out: dict[str, tuple[ResourceList | None, ResourceList | None]] = {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for i, cs in enumerate(list_at(status, key, where)):
            if not isinstance(cs, Mapping) or str(cs.get("name") or "") in out:
                continue
            w = f"{where}.{key}[{i}]"
            allocated = cs.get("allocatedResources")
            res = object_at(cs, "resources", w)
            actuated = res.get("requests")
            out[str(cs.get("name") or "")] = (
                None if allocated is None else _resource_list(allocated, f"{w}.allocatedResources"),
                None if actuated is None else _resource_list(actuated, f"{w}.resources.requests"),
            )
    return out


def _resize_infeasible(status: Mapping[str, Any], where: str) -> bool:
    """Upstream ``IsPodResizeInfeasible``: the first PodResizePending condition has reason Infeasible."""
    for c in list_at(status, "conditions", where):
        if isinstance(c, Mapping) and c.get("type") == "PodResizePending":
            return c.get("reason") == "Infeasible"
    return False


def _default_pod_level_requests(
    requests: dict[str, int], limits: ResourceList, containers: ResourceList
) -> dict[str, int]:
    """The API server's defaulting of pod-level requests (upstream ``defaultPodLevelRequests``), for
    bodies that did not go through it (simulation files): cpu / memory the containers request, then
    anything with a pod-level limit. Hugepages are left out: their requests must equal their
    limits, so defaulting them changes no amount."""
    out = dict(requests)
    for name, amount in containers.items():
        if name in (CPU, MEMORY) and name not in out:
            out[name] = amount
    for name, amount in limits.items():
        if is_pod_level_resource(name) and name not in out:
            out[name] = amount
    return out


_VOLUME_IDENT: Final = {
    "gcePersistentDisk": "pdName",
    "awsElasticBlockStore": "volumeID",
    "azureDisk": "diskName",
    "iscsi": "iqn",
    "persistentVolumeClaim": "claimName",
    "cinder": "volumeID",
    "portworxVolume": "volumeID",
}
MIGRATED_PLUGINS_ANNOTATION: Final = "storage.alpha.kubernetes.io/migrated-plugins"
#: the API server's default ``azureDisk.kind`` (``AzureSharedBlobDisk``)
AZURE_DISK_DEFAULT_KIND: Final = "Shared"


def _azure_disk(value: Mapping[str, Any]) -> tuple[str, str]:
    """An Azure Disk source's ``diskURI`` and ``kind`` (defaulted as the API server does)."""
    return str(value.get("diskURI") or ""), str(value.get("kind") or AZURE_DISK_DEFAULT_KIND)


def _volume(raw: Any, where: str) -> Volume:
    if not isinstance(raw, Mapping):
        raise ObjectError(f"{where}: expected a volume object")
    name = str(raw.get("name") or "")
    for kind, value in raw.items():
        if kind == "name" or not isinstance(value, Mapping):
            continue
        read_only = bool(value.get("readOnly", False))
        if kind == "rbd":
            ident = f"{value.get('pool') or 'rbd'}/{value.get('image') or ''}"
            return Volume(
                name, kind, ident, read_only, frozenset(str(m) for m in list_at(value, "monitors", f"{where}.rbd"))
            )
        if kind == "iscsi":
            return Volume(name, kind, str(value.get("iqn") or ""), read_only)
        if kind == "csi":
            return Volume(
                name, kind, str(value.get("volumeHandle") or ""), read_only, driver=str(value.get("driver") or "")
            )
        if kind == "ephemeral":
            # A generic ephemeral volume is backed by a PVC named <pod>-<volume>.
            return Volume(name, kind, name, read_only)
        if kind == "image":
            # an OCI image mounted as a volume (ImageLocality counts it like a container image)
            return Volume(name, kind, str(value.get("reference") or ""), read_only)
        key = _VOLUME_IDENT.get(kind)
        if kind == "azureDisk":
            uri, disk_kind = _azure_disk(value)
            return Volume(name, kind, str(value.get(key) or ""), read_only, disk_uri=uri, disk_kind=disk_kind)
        return Volume(name, kind, str(value.get(key) or "") if key else "", read_only)
    return Volume(name, "emptyDir")


def _pod_resources(
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    where: str,
    containers: list[tuple[Container, dict[str, int], dict[str, int]]],
    init_containers: list[tuple[Container, dict[str, int], dict[str, int]]],
    overhead: ResourceList,
) -> PodResources:
    """What ``PodRequests`` reads: container lists with their status lists, pod-level resources, overhead."""
    swhere = where.replace(": spec", ": status")
    statuses = _status_lists(status, swhere)

    def lists(c: Container, request_list: dict[str, int]) -> ContainerResources:
        allocated, actuated = statuses.get(c.name, (None, None))
        return ContainerResources(request_list, allocated, actuated, c.restartable)

    regular = tuple(lists(c, r) for c, r, _ in containers)
    init = tuple(lists(c, r) for c, r, _ in init_containers)
    pod_level_requests: dict[str, int] | None = None
    pod_level = object_at(spec, "resources", where)
    if pod_level.get("requests") is not None or pod_level.get("limits") is not None:
        given = _resource_list(pod_level.get("requests"), f"{where}.resources.requests")
        limits = _resource_list(pod_level.get("limits"), f"{where}.resources.limits")
        from_containers = pod_requests(PodResources(regular, init), use_status=False, pod_level=False)
        pod_level_requests = _default_pod_level_requests(given, limits, from_containers) or None
    allocated = status.get("allocatedResources")
    actuated = object_at(status, "resources", swhere).get("requests")
    return PodResources(
        regular,
        init,
        pod_requests=pod_level_requests,
        pod_allocated=None if allocated is None else _resource_list(allocated, f"{swhere}.allocatedResources"),
        pod_actuated=None if actuated is None else _resource_list(actuated, f"{swhere}.resources.requests"),
        pod_status_resources=status.get("resources") is not None,
        overhead=overhead or None,
        resize_infeasible=_resize_infeasible(status, swhere),
    )


def _check_totals(totals: ResourceList, where: str) -> None:
    """The pod's summed requests must fit what one resource amount holds (each part was checked alone)."""
    for name, amount in totals.items():
        try:
            check_amount(amount)
        except QuantityError as exc:
            raise ObjectError(f"{where}.containers: the pod's total request of {name} {exc}") from None


def parse_pod(body: Mapping[str, Any]) -> Pod:
    """A Pod from its API body; raises ``ObjectError`` naming the bad field."""
    if not isinstance(body, Mapping):
        raise ObjectError("pod: expected an object")
    meta = object_at(body, "metadata", "pod")
    spec = object_at(body, "spec", "pod")
    status = object_at(body, "status", "pod")
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default")
    where = f"pod {namespace}/{name}: spec"
    regular = [
        _container(c, f"{where}.containers[{i}]", init=False) for i, c in enumerate(list_at(spec, "containers", where))
    ]
    init_parsed = [
        _container(c, f"{where}.initContainers[{i}]", init=True)
        for i, c in enumerate(list_at(spec, "initContainers", where))
    ]
    containers = tuple(c for c, _, _ in regular)
    init = tuple(c for c, _, _ in init_parsed)
    overhead_list = _resource_list(spec.get("overhead"), f"{where}.overhead")
    overhead = to_resources(overhead_list)
    resources = _pod_resources(spec, status, where, regular, init_parsed, overhead_list)
    # upstream PodInfo.CalculateResource: requests, and the non-zero requests NodeInfo sums
    requested = pod_requests(resources, use_status=True, pod_level=True)
    non_missing = non_missing_defaults(requested, resources.pod_level_requests_set)
    non_zero = (
        pod_requests(resources, use_status=True, pod_level=True, non_missing=non_missing) if non_missing else requested
    )
    for totals in (requested, non_zero):
        _check_totals(totals, where)
    owners = tuple(
        OwnerReference(
            str(o.get("kind") or ""),
            str(o.get("name") or ""),
            str(o.get("uid") or ""),
            bool(o.get("controller", False)),
        )
        for o in list_at(meta, "ownerReferences", f"pod {namespace}/{name}: metadata")
        if isinstance(o, Mapping)
    )
    priority = spec.get("priority")
    disruption, scheduled_at = "", None
    for c in list_at(status, "conditions", f"pod {namespace}/{name}: status"):
        if isinstance(c, Mapping) and c.get("status") == "True":
            if c.get("type") == CONDITION_DISRUPTION_TARGET:
                disruption = str(c.get("reason") or "")
            elif c.get("type") == CONDITION_POD_SCHEDULED and spec.get("nodeName"):
                scheduled_at = _time(
                    c.get("lastTransitionTime"), f"pod {namespace}/{name}: status.conditions[PodScheduled]"
                )
    pending = (
        {}
        if spec.get("nodeName")
        else _pending_fields(body, meta, spec, status, where, resources, _limits(regular, init_parsed, overhead_list))
    )
    return Pod(
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or f"{namespace}/{name}"),
        labels=_str_map(meta, "labels", "metadata"),
        annotations=_str_map(meta, "annotations", "metadata"),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        node_name=str(spec.get("nodeName") or ""),
        phase=str(status.get("phase") or "Pending"),
        priority=integer(priority, f"{where}.priority") if priority is not None else 0,
        preemption_policy=str(spec.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY),
        deleting=meta.get("deletionTimestamp") is not None,
        resource_version=str(meta.get("resourceVersion") or ""),
        generation=integer(meta.get("generation"), f"pod {namespace}/{name}: metadata.generation"),
        owner_references=owners,
        containers=containers,
        init_containers=init,
        overhead=overhead,
        affinity=parse_affinity(spec.get("affinity"), f"{where}.affinity"),
        volumes=tuple(_volume(v, f"{where}.volumes[{i}]") for i, v in enumerate(list_at(spec, "volumes", where))),
        scheduling_group=str(object_at(spec, "schedulingGroup", where).get("podGroupName") or ""),
        start_time=_time(status.get("startTime"), f"pod {namespace}/{name}: status.startTime"),
        disruption_target=disruption,
        scheduled_at=scheduled_at,
        requests=to_resources(requested),
        non_zero_requests=to_resources(non_zero),
        host_ports=tuple(p for c in init if c.restartable for p in c.ports)
        + tuple(p for c in containers for p in c.ports),
        **pending,
    )


#: the keys of a pod's status before a kubelet writes it: all ``parse_bound`` may meet
_UNSTARTED_STATUS: Final = frozenset({"phase", "conditions", "qosClass"})


def parse_bound(body: Mapping[str, Any], assumed: Pod) -> Pod | None:
    """The bound version `body` of the pod `assumed` (parsed from its unbound version and assumed on a
    node) as ``parse_pod`` would read it, without parsing it again, when the two differ only where a bind
    changes a pod: ``spec.nodeName`` (the node it was assumed on), a ``PodScheduled`` condition, the labels
    the API server copies from the node (v1.35 PodTopologyLabels: read from `body`) and the resourceVersion.
    The spec is unchanged when ``metadata.generation`` is (the API server counts the spec's changes); the
    annotations and owners are compared, and the status may hold nothing a kubelet writes. None when
    anything else may differ, or no generation is given: then `body` must be parsed. The assigned-pod
    informer sees each pod we bound once more, and a whole parse of it cost 3-4 times this (issue 27)."""
    meta, spec, status = body.get("metadata"), body.get("spec"), body.get("status")
    if not (isinstance(meta, dict) and isinstance(spec, dict) and isinstance(status, dict)):
        return None
    if not assumed.generation or meta.get("generation") != assumed.generation:
        return None
    if not assumed.node_name or spec.get("nodeName") != assumed.node_name or meta.get("deletionTimestamp"):
        return None
    if status.keys() - _UNSTARTED_STATUS or str(status.get("phase") or "Pending") != assumed.phase:
        return None
    if (meta.get("annotations") or {}) != assumed.annotations:
        return None
    owners = meta.get("ownerReferences") or []
    if not isinstance(owners, list) or len(owners) != len(assumed.owner_references):
        return None
    for o, ref in zip(owners, assumed.owner_references, strict=True):
        if not isinstance(o, dict) or (o.get("kind"), o.get("name"), o.get("uid")) != (ref.kind, ref.name, ref.uid):
            return None
        if bool(o.get("controller", False)) != ref.controller:
            return None
    scheduled_at = None
    conditions = status.get("conditions") or ()
    if not isinstance(conditions, list):
        return None
    for c in conditions:
        if not isinstance(c, dict) or c.get("type") != CONDITION_POD_SCHEDULED:
            return None
        if c.get("status") == "True":
            try:
                scheduled_at = _time(c.get("lastTransitionTime"), "status.conditions[PodScheduled]")
            except ObjectError:
                return None
    try:
        labels = _str_map(meta, "labels", "metadata")
    except ObjectError:
        return None
    values = list(_POD_VALUES(assumed))
    for index, default in _UNBOUND_ONLY:
        values[index] = default
    values[_LABELS] = labels
    values[_RESOURCE_VERSION] = str(meta.get("resourceVersion") or "")
    values[_SCHEDULED_AT] = scheduled_at
    return Pod(*values)


_POD_FIELDS: Final = dataclasses.fields(Pod)
_POD_VALUES: Final = operator.attrgetter(*(f.name for f in _POD_FIELDS))
_POD_INDEX: Final = {f.name: i for i, f in enumerate(_POD_FIELDS)}
_LABELS, _RESOURCE_VERSION, _SCHEDULED_AT = (_POD_INDEX[n] for n in ("labels", "resource_version", "scheduled_at"))
#: the fields ``parse_pod`` reads only of an unbound pod (``_pending_fields``), with a bound pod's defaults
PENDING_ONLY_FIELDS: Final = (
    "node_selector",
    "tolerations",
    "topology_spread_constraints",
    "scheduling_gates",
    "nominated_node_name",
    "container_non_zero_requests",
    "limits",
    "resource_claims",
    "source",
)
_UNBOUND_ONLY: Final = tuple((_POD_INDEX[name], getattr(Pod("", "", ""), name)) for name in PENDING_ONLY_FIELDS)


def _limits(
    regular: list[tuple[Container, dict[str, int], dict[str, int]]],
    init_parsed: list[tuple[Container, dict[str, int], dict[str, int]]],
    overhead_list: dict[str, int],
) -> PodResources:
    """The containers' limits (and the pod's overhead) in the shape ``pod_requests`` sums."""
    return PodResources(
        tuple(ContainerResources(lim) for _, _, lim in regular),
        tuple(ContainerResources(lim, restartable=c.restartable) for c, _, lim in init_parsed),
        overhead=overhead_list,
    )


def _pending_fields(
    body: Mapping[str, Any],
    meta: Mapping[str, Any],
    spec: Mapping[str, Any],
    status: Mapping[str, Any],
    where: str,
    resources: PodResources,
    limit_lists: PodResources,
) -> dict[str, Any]:
    """The fields only a pod to be scheduled is read for: where it may go (node selector,
    tolerations, spread constraints, gates, nomination), what it is scored with (the containers'
    requests, its limits: `limit_lists`, ``_limits``) and its body (for extenders). A bound pod leaves
    them at their defaults."""
    # upstream NodeResourcesFit's scorer: no pod-level resources, no status, defaults for cpu / memory
    container_non_zero = pod_requests(
        resources, use_status=False, pod_level=False, non_missing=non_missing_defaults({}, False)
    )
    _check_totals(container_non_zero, where)
    tolerations = []
    for i, t in enumerate(list_at(spec, "tolerations", where)):
        w = f"{where}.tolerations[{i}]"
        if not isinstance(t, Mapping):
            raise ObjectError(f"{w}: expected a toleration object")
        secs = t.get("tolerationSeconds")
        tolerations.append(
            Toleration(
                key=str(t.get("key") or ""),
                operator=str(t.get("operator") or "Equal"),
                value=str(t.get("value") or ""),
                effect=str(t.get("effect") or ""),
                toleration_seconds=None if secs is None else integer(secs, f"{w}.tolerationSeconds"),
            )
        )
    spread = []
    for i, c in enumerate(list_at(spec, "topologySpreadConstraints", where)):
        w = f"{where}.topologySpreadConstraints[{i}]"
        if not isinstance(c, Mapping):
            raise ObjectError(f"{w}: expected an object")
        spread.append(
            TopologySpreadConstraint(
                max_skew=integer(c.get("maxSkew"), f"{w}.maxSkew", 1),
                topology_key=str(c.get("topologyKey") or ""),
                when_unsatisfiable=str(c.get("whenUnsatisfiable") or "DoNotSchedule"),
                label_selector=parse_label_selector(c.get("labelSelector"), f"{w}.labelSelector"),
                min_domains=None if c.get("minDomains") is None else integer(c.get("minDomains"), f"{w}.minDomains"),
                match_label_keys=tuple(str(k) for k in list_at(c, "matchLabelKeys", w)),
                node_affinity_policy=_optional_str(c.get("nodeAffinityPolicy"), f"{w}.nodeAffinityPolicy"),
                node_taints_policy=_optional_str(c.get("nodeTaintsPolicy"), f"{w}.nodeTaintsPolicy"),
            )
        )
    return {
        "node_selector": _str_map(spec, "nodeSelector", where),
        "tolerations": tuple(tolerations),
        "topology_spread_constraints": tuple(spread),
        "scheduling_gates": tuple(
            str(g.get("name")) for g in list_at(spec, "schedulingGates", where) if isinstance(g, Mapping)
        ),
        "nominated_node_name": str(status.get("nominatedNodeName") or ""),
        "container_non_zero_requests": to_resources(container_non_zero),
        "limits": to_resources(pod_requests(limit_lists, use_status=False, pod_level=False)),
        "resource_claims": parse_pod_claims(body),
        "source": without_managed_fields(body, meta),
    }


def _claim_name(raw: Mapping[str, Any], key: str, where: str) -> str | None:
    return _optional_str(raw.get(key), f"{where}.{key}")


def parse_pod_claims(body: Mapping[str, Any] | None) -> PodClaims:
    """A pod's ``spec.resourceClaims`` and ``status.resourceClaimStatuses`` (DynamicResources).

    Costs two dictionary lookups for a pod without claims (most pods)."""
    if not body:
        return NO_POD_CLAIMS
    spec = body.get("spec")
    raw = spec.get("resourceClaims") if isinstance(spec, Mapping) else None
    if not raw:
        return NO_POD_CLAIMS
    where = "pod: spec"
    if not isinstance(raw, list):
        raise ObjectError(f"{where}.resourceClaims: expected a list, got {type(raw).__name__}")
    claims = []
    for i, c in enumerate(raw):
        w = f"{where}.resourceClaims[{i}]"
        if not isinstance(c, Mapping):
            raise ObjectError(f"{w}: expected {{name, resourceClaimName | resourceClaimTemplateName}}")
        claims.append(
            PodResourceClaim(
                _claim_name(c, "name", w) or "",
                _claim_name(c, "resourceClaimName", w),
                _claim_name(c, "resourceClaimTemplateName", w),
            )
        )
    statuses: dict[str, str | None] = {}
    status = body.get("status")
    if isinstance(status, Mapping):
        for i, s in enumerate(list_at(status, "resourceClaimStatuses", "pod: status")):
            w = f"pod: status.resourceClaimStatuses[{i}]"
            if not isinstance(s, Mapping):
                raise ObjectError(f"{w}: expected {{name, resourceClaimName}}")
            statuses[_claim_name(s, "name", w) or ""] = _claim_name(s, "resourceClaimName", w)
    return PodClaims(tuple(claims), statuses)


def parse_node(body: Mapping[str, Any]) -> Node:
    """A Node from its API body; raises ``ObjectError`` naming the bad field."""
    if not isinstance(body, Mapping):
        raise ObjectError("node: expected an object")
    meta = object_at(body, "metadata", "node")
    spec = object_at(body, "spec", "node")
    status = object_at(body, "status", "node")
    name = str(meta.get("name") or "")
    where = f"node {name}"
    taints = []
    for i, t in enumerate(list_at(spec, "taints", f"{where}: spec")):
        if not isinstance(t, Mapping) or not t.get("key"):
            raise ObjectError(f"{where}: spec.taints[{i}]: expected {{key, value, effect}}")
        taints.append(Taint(str(t["key"]), str(t.get("value") or ""), str(t.get("effect") or NO_SCHEDULE)))
    conditions = {}
    for c in list_at(status, "conditions", f"{where}: status"):
        if isinstance(c, Mapping) and c.get("type"):
            conditions[str(c["type"])] = str(c.get("status") or "Unknown")
    raw_alloc = status.get("allocatable")
    raw_cap = status.get("capacity")
    if raw_alloc is None:
        raw_alloc = raw_cap
    allocatable = _resources(raw_alloc, f"{where}: status.allocatable")
    capacity = _resources(raw_cap, f"{where}: status.capacity")
    pods = 0
    if isinstance(raw_alloc, Mapping) and raw_alloc.get("pods") is not None:
        try:
            pods = check_amount(to_units(raw_alloc["pods"]))
        except QuantityError as exc:
            raise ObjectError(f"{where}: status.allocatable.pods: {exc}") from None
    images = []
    for i, img in enumerate(list_at(status, "images", f"{where}: status")):
        if isinstance(img, Mapping):
            images.append(
                ImageState(
                    tuple(str(n) for n in list_at(img, "names", f"{where}: status.images[{i}]")),
                    _amount(img.get("sizeBytes"), f"{where}: status.images[{i}].sizeBytes"),
                )
            )
    return Node(
        name=name,
        uid=str(meta.get("uid") or name),
        labels=_str_map(meta, "labels", "metadata"),
        annotations=_str_map(meta, "annotations", "metadata"),
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable", False)),
        conditions=conditions,
        allocatable=allocatable,
        allowed_pod_number=pods,
        capacity=capacity,
        images=tuple(images),
        resource_version=str(meta.get("resourceVersion") or ""),
        source=without_managed_fields(body, meta),
    )


def parse_persistent_volume(body: Mapping[str, Any]) -> PersistentVolume:
    meta = object_at(body, "metadata", "pv")
    spec = object_at(body, "spec", "pv")
    name = str(meta.get("name") or "")
    where = f"persistentvolume {name}: spec"
    kind = ident = driver = disk_uri = disk_kind = ""
    for k, value in spec.items():
        if k in _VOLUME_IDENT and isinstance(value, Mapping):
            kind, ident = k, str(value.get(_VOLUME_IDENT[k]) or "")
            if k == "azureDisk":
                disk_uri, disk_kind = _azure_disk(value)
        elif k == "csi" and isinstance(value, Mapping):
            kind, ident, driver = "csi", str(value.get("volumeHandle") or ""), str(value.get("driver") or "")
        elif k in ("hostPath", "local", "nfs") and not kind:
            kind = k
    claim = object_at(spec, "claimRef", where)
    affinity = None
    na = object_at(spec, "nodeAffinity", where)
    if na.get("required") is not None:
        req = object_at(na, "required", f"{where}.nodeAffinity")
        affinity = tuple(
            parse_node_selector_term(t, f"{where}.nodeAffinity.required.nodeSelectorTerms[{i}]")
            for i, t in enumerate(list_at(req, "nodeSelectorTerms", where))
        )
    cap = object_at(spec, "capacity", where)
    try:
        capacity = check_amount(to_units(cap["storage"])) if cap.get("storage") is not None else 0
    except QuantityError as exc:
        raise ObjectError(f"{where}.capacity.storage: {exc}") from None
    return PersistentVolume(
        name=name,
        kind=kind,
        ident=ident,
        driver=driver,
        labels=_str_map(meta, "labels", "metadata"),
        storage_class=str(spec.get("storageClassName") or ""),
        capacity=capacity,
        access_modes=tuple(str(m) for m in list_at(spec, "accessModes", where)),
        claim_ref=f"{claim.get('namespace', '')}/{claim.get('name', '')}" if claim.get("name") else "",
        node_affinity=affinity,
        phase=str(object_at(body, "status", "pv").get("phase") or "Available"),
        disk_uri=disk_uri,
        disk_kind=disk_kind,
        claim_uid=str(claim.get("uid") or "") if claim.get("name") else "",
        resource_version=str(meta.get("resourceVersion") or ""),
        source=without_managed_fields(body, meta),
    )


def parse_persistent_volume_claim(body: Mapping[str, Any]) -> PersistentVolumeClaim:
    meta = object_at(body, "metadata", "pvc")
    spec = object_at(body, "spec", "pvc")
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    where = f"persistentvolumeclaim {ns}/{name}: spec"
    req = object_at(object_at(spec, "resources", where), "requests", where)
    try:
        request = check_amount(to_units(req["storage"])) if req.get("storage") is not None else 0
    except QuantityError as exc:
        raise ObjectError(f"{where}.resources.requests.storage: {exc}") from None
    sc = spec.get("storageClassName")
    return PersistentVolumeClaim(
        namespace=ns,
        name=name,
        volume_name=str(spec.get("volumeName") or ""),
        storage_class=None if sc is None else str(sc),
        access_modes=tuple(str(m) for m in list_at(spec, "accessModes", where)),
        request=request,
        phase=str(object_at(body, "status", "pvc").get("phase") or "Pending"),
        selector=parse_label_selector(spec.get("selector"), f"{where}.selector"),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        selected_node=str(_str_map(meta, "annotations", "metadata").get(ANNOTATION_SELECTED_NODE) or ""),
        source=without_managed_fields(body, meta),
    )


def parse_storage_class(body: Mapping[str, Any]) -> StorageClass:
    meta = object_at(body, "metadata", "storageclass")
    name = str(meta.get("name") or "")
    topologies = []
    for i, t in enumerate(list_at(body, "allowedTopologies", f"storageclass {name}")):
        if isinstance(t, Mapping):
            w = f"storageclass {name}: allowedTopologies[{i}]"
            exprs = tuple(
                NodeSelectorRequirement(
                    str(e.get("key")),
                    "In",
                    tuple(str(v) for v in list_at(e, "values", f"{w}.matchLabelExpressions[{j}]")),
                )
                for j, e in enumerate(list_at(t, "matchLabelExpressions", w))
                if isinstance(e, Mapping)
            )
            topologies.append(NodeSelectorTerm(exprs))
    return StorageClass(
        name=name,
        provisioner=str(body.get("provisioner") or ""),
        volume_binding_mode=str(body.get("volumeBindingMode") or "Immediate"),
        allowed_topologies=tuple(topologies),
    )


def parse_service(body: Mapping[str, Any]) -> Service:
    meta = object_at(body, "metadata", "service")
    spec = object_at(body, "spec", "service")
    return Service(
        str(meta.get("namespace") or "default"), str(meta.get("name") or ""), _str_map(spec, "selector", "service spec")
    )


def parse_controller(body: Mapping[str, Any]) -> Controller:
    """ReplicationController (map selector), ReplicaSet / StatefulSet (label selector)."""
    kind = str(body.get("kind") or "")
    meta = object_at(body, "metadata", kind or "controller")
    spec = object_at(body, "spec", kind or "controller")
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    raw = spec.get("selector")
    if kind == "ReplicationController":
        sel = LabelSelector(_str_map(spec, "selector", f"{kind} {ns}/{name}: spec")) if raw else None
    else:
        sel = parse_label_selector(raw, f"{kind} {ns}/{name}: spec.selector")
    return Controller(kind, ns, name, str(meta.get("uid") or ""), sel)


def parse_pod_disruption_budget(body: Mapping[str, Any]) -> PodDisruptionBudget:
    meta = object_at(body, "metadata", "pdb")
    spec = object_at(body, "spec", "pdb")
    status = object_at(body, "status", "pdb")
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    return PodDisruptionBudget(
        ns,
        name,
        parse_label_selector(spec.get("selector"), f"pdb {ns}/{name}: spec.selector"),
        integer(status.get("disruptionsAllowed"), f"pdb {ns}/{name}: status.disruptionsAllowed"),
        frozenset(str(k) for k in object_at(status, "disruptedPods", f"pdb {ns}/{name}: status")),
    )


def parse_pod_group(body: Mapping[str, Any]) -> PodGroup:
    """A ``scheduling.k8s.io/v1beta1`` PodGroup (upstream's Workload API)."""
    meta = object_at(body, "metadata", "podgroup")
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    where = f"podgroup {ns}/{name}"
    policy = object_at(object_at(body, "spec", where), "schedulingPolicy", f"{where}: spec")
    gang = object_at(policy, "gang", f"{where}: spec.schedulingPolicy")
    spec = object_at(body, "spec", where)
    disruption = object_at(spec, "disruptionMode", f"{where}: spec")
    scheduled = ""
    for c in list_at(object_at(body, "status", where), "conditions", f"{where}: status"):
        if isinstance(c, Mapping) and c.get("type") == CONDITION_POD_GROUP_INITIALLY_SCHEDULED:
            scheduled = str(c.get("status") or "")
    return PodGroup(
        WORKLOAD_API,
        ns,
        name,
        str(meta.get("uid") or ""),
        gang="gang" in policy,
        min_count=integer(gang.get("minCount"), f"{where}: spec.schedulingPolicy.gang.minCount", 1),
        generation=integer(meta.get("generation"), f"{where}: metadata.generation"),
        initially_scheduled=scheduled,
        priority=integer(spec.get("priority"), f"{where}: spec.priority"),
        disrupted_together="all" in disruption,
    )


def parse_coscheduling_pod_group(body: Mapping[str, Any]) -> PodGroup:
    """A ``scheduling.x-k8s.io/v1alpha1`` PodGroup (scheduler-plugins' coscheduling CRD)."""
    meta = object_at(body, "metadata", "podgroup")
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    where = f"podgroup {ns}/{name}: spec"
    spec = object_at(body, "spec", where)
    timeout = spec.get("scheduleTimeoutSeconds")
    return PodGroup(
        COSCHEDULING_API,
        ns,
        name,
        str(meta.get("uid") or ""),
        min_count=integer(spec.get("minMember"), f"{where}.minMember", 1),
        schedule_timeout_seconds=None if timeout is None else integer(timeout, f"{where}.scheduleTimeoutSeconds"),
        generation=integer(meta.get("generation"), f"podgroup {ns}/{name}: metadata.generation"),
    )


def parse_priority_class(body: Mapping[str, Any]) -> PriorityClass:
    meta = object_at(body, "metadata", "priorityclass")
    name = str(meta.get("name") or "")
    if body.get("value") is None:
        raise ObjectError(f"priorityclass {name}: value: required")
    return PriorityClass(
        name,
        integer(body.get("value"), f"priorityclass {name}: value"),
        bool(body.get("globalDefault", False)),
        str(body.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY),
    )


def parse_csi_driver(body: Mapping[str, Any]) -> CSIDriver:
    meta = object_at(body, "metadata", "csidriver")
    spec = object_at(body, "spec", "csidriver")
    return CSIDriver(str(meta.get("name") or ""), spec.get("storageCapacity") is True)


def _optional_bytes(body: Mapping[str, Any], key: str, where: str) -> int | None:
    if body.get(key) is None:
        return None
    try:
        return check_amount(to_units(body[key]))
    except QuantityError as exc:
        raise ObjectError(f"{where}.{key}: {exc}") from None


def parse_csi_storage_capacity(body: Mapping[str, Any]) -> CSIStorageCapacity:
    meta = object_at(body, "metadata", "csistoragecapacity")
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    where = f"csistoragecapacity {ns}/{name}"
    return CSIStorageCapacity(
        namespace=ns,
        name=name,
        storage_class=str(body.get("storageClassName") or ""),
        node_topology=parse_label_selector(body.get("nodeTopology"), f"{where}.nodeTopology"),
        capacity=_optional_bytes(body, "capacity", where),
        maximum_volume_size=_optional_bytes(body, "maximumVolumeSize", where),
    )


def parse_csi_node(body: Mapping[str, Any]) -> CSINode:
    meta = object_at(body, "metadata", "csinode")
    limits = {}
    for d in list_at(object_at(body, "spec", "csinode"), "drivers", "csinode spec"):
        if (
            isinstance(d, Mapping)
            and isinstance(d.get("allocatable"), Mapping)
            and d["allocatable"].get("count") is not None
        ):
            limits[str(d.get("name"))] = integer(
                d["allocatable"]["count"],
                f"csinode {meta.get('name') or ''}: spec.drivers[{d.get('name')}].allocatable.count",
            )
    annotations = _str_map(meta, "annotations", "metadata")
    migrated = annotations.get(MIGRATED_PLUGINS_ANNOTATION) or ""
    return CSINode(str(meta.get("name") or ""), limits, frozenset(migrated.split(",")) if migrated else frozenset())
