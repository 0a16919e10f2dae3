"""Read Kubernetes manifests (multi-document YAML, ``kind: List``) into core objects, and policy files into profiles.

Everything the scheduler reads is accepted; other kinds are counted and
ignored, so a ``kubectl get -o yaml`` dump can be fed in as it is. PodGroups of both APIs
(``scheduling.k8s.io/v1beta1``, ``scheduling.x-k8s.io/v1alpha1``) make gangs (``core/toolkit/gangs.py``);
DeviceClasses, ResourceSlices, DeviceTaintRules, ResourceClaims and ResourceClaimTemplates
(``resource.k8s.io/v1``) go into the DRA tracker (``sim/dra.py``).

PriorityClasses in the cluster file (and the two system classes every API server has) stand in
for the API server's Priority admission: a pod written without ``spec.priority`` gets the value
(and the ``preemptionPolicy``) of its ``priorityClassName``, or of the ``globalDefault`` class
(the lowest-valued one if several claim it), or 0 and PreemptLowerPriority; a pod naming a class
that does not exist, or whose own ``preemptionPolicy`` differs from the one computed, is refused
as the API server would (``preemptionPolicy: Never`` comes from a PriorityClass). A pod that
already carries ``spec.priority`` (any dump of a real cluster) is taken as it is.

Three sources come through here: CLUSTER.yaml, a live snapshot (``simulate --from-cluster``,
``edge/snapshot.py``) and a recorded trace's pruned bodies (``replay``, ``sim/replay.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from ..core.config.profile import Profile
from ..core.config.registry import Registry
from ..core.framework import usage
from ..core.framework.snapshot import ClusterObjects
from ..core.model import objects as o
from ..core.model import parsing
from ..core.state.cache import SchedulerCache
from ..core.toolkit import gangs
from . import dra
from .simulator import UnreadablePod

#: libyaml's loader where PyYAML was built with it (the wheels are): the same safe types, about eight
#: times faster than the pure-Python one on a large dump; the pure one where there is no libyaml.
_SAFE_LOADER: Final[type[yaml.SafeLoader] | type[yaml.CSafeLoader]] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ManifestError(ValueError):
    """A document that cannot be read; the message names the file and document."""


def iter_documents(text: str, source: str) -> Iterator[Mapping[str, Any]]:
    """Every object in a YAML stream, with ``kind: List`` (and ``*List``) items flattened."""
    try:
        docs = list(yaml.load_all(text, Loader=_SAFE_LOADER))
    except yaml.YAMLError as exc:
        raise ManifestError(f"{source}: not valid YAML: {exc}") from None
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            raise ManifestError(f"{source}: document {i + 1} is not an object")
        kind = str(doc.get("kind") or "")
        if kind == "List" or (kind.endswith("List") and isinstance(doc.get("items"), list)):
            item_kind = kind[:-4] if kind != "List" else ""
            for item in doc.get("items") or ():
                if isinstance(item, Mapping):
                    if item_kind and not item.get("kind"):
                        item = {**item, "kind": item_kind}
                    yield item
        else:
            yield doc


def read_documents(path: str | Path) -> list[Mapping[str, Any]]:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ManifestError(f"{p}: {exc.strerror}") from None
    return list(iter_documents(text, str(p)))


@dataclass(slots=True)
class LoadedCluster:
    cache: SchedulerCache
    ignored: dict[str, int] = field(default_factory=dict)  # kind -> count
    pending_in_cluster: list[o.Pod] = field(default_factory=list)  # unbound pods found in the cluster file
    #: name -> class: the file's PriorityClasses and the system ones
    priority_classes: dict[str, o.PriorityClass] = field(default_factory=dict)


def admit_priority(doc: Mapping[str, Any], classes: Mapping[str, o.PriorityClass]) -> Mapping[str, Any]:
    """The pod manifest `doc` as the Priority admission plugin leaves it (a copy when it changes).

    Upstream ``plugin/pkg/admission/priority``: raises ``ObjectError`` with the API server's words
    for an unknown class name or a ``preemptionPolicy`` that differs from the computed one.
    """
    spec = doc.get("spec")
    if not isinstance(spec, Mapping) or spec.get("priority") is not None:
        return doc
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    where = f"pod {meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
    name = spec.get("priorityClassName")
    if name:
        pc = classes.get(str(name))
        if pc is None:
            raise parsing.ObjectError(f"{where}: no PriorityClass with name {name} was found")
    else:
        defaults = [c for c in classes.values() if c.global_default]
        pc = min(defaults, key=lambda c: c.value) if defaults else None
    policy = pc.preemption_policy if pc is not None else o.PREEMPT_LOWER_PRIORITY
    given = spec.get("preemptionPolicy")
    if given and given != policy:
        raise parsing.ObjectError(
            f"{where}: the string value of PreemptionPolicy ({given}) must not be provided in pod spec; "
            f"priority admission controller computed {policy} from the given PriorityClass name"
        )
    admitted = {**spec, "priority": pc.value if pc is not None else 0, "preemptionPolicy": policy}
    if pc is not None:
        admitted["priorityClassName"] = pc.name
    return {**doc, "spec": admitted}


def admit_pod_group_priority(doc: Mapping[str, Any], classes: Mapping[str, o.PriorityClass]) -> Mapping[str, Any]:
    """A ``scheduling.k8s.io`` PodGroup as the Priority admission plugin leaves it (upstream ``admitPodGroup``):
    ``spec.priority`` from its ``priorityClassName`` (or the ``globalDefault`` class, else 0) when unset; the API
    server's words for an unknown class. A PodGroup that carries its priority (a dump) is taken as it is."""
    spec = doc.get("spec")
    if not isinstance(spec, Mapping) or spec.get("priority") is not None:
        return doc
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    name = spec.get("priorityClassName")
    if name:
        pc = classes.get(str(name))
        if pc is None:
            where = f"podgroup {meta.get('namespace') or 'default'}/{meta.get('name') or ''}"
            raise parsing.ObjectError(f"{where}: no PriorityClass with name {name} was found")
    else:
        defaults = [c for c in classes.values() if c.global_default]
        pc = min(defaults, key=lambda c: c.value) if defaults else None
    admitted = {**spec, "priority": pc.value if pc is not None else 0}
    if pc is not None:
        admitted["priorityClassName"] = pc.name
    return {**doc, "spec": admitted}


def load_cluster(docs: Iterable[Mapping[str, Any]], *, source: str = "cluster") -> LoadedCluster:
    """A cache filled with the nodes, bound pods and other objects of ``docs``."""
    cache = SchedulerCache()
    loaded = LoadedCluster(cache)
    objs = cache.objects
    pods: list[o.Pod] = []
    node_metrics: list[Mapping[str, Any]] = []
    docs = list(docs)
    classes = loaded.priority_classes
    classes.update((c.name, c) for c in o.SYSTEM_PRIORITY_CLASSES)
    for doc in docs:
        if doc.get("kind") == "PriorityClass":
            try:
                pc = parsing.parse_priority_class(doc)
            except parsing.ObjectError as exc:
                raise ManifestError(f"{source}: {exc}") from None
            classes[pc.name] = pc
    for doc in docs:
        kind = str(doc.get("kind") or "")
        try:
            if kind == "PriorityClass":
                continue
            if kind == "Node":
                cache.add_node(parsing.parse_node(doc))
            elif kind == "NodeMetrics":
                node_metrics.append(doc)
            elif kind == "Pod":
                pod = parsing.parse_pod(admit_priority(doc, classes))
                if pod.is_terminal:
                    continue
                (pods if pod.node_name else loaded.pending_in_cluster).append(pod)
            elif kind == "PodGroup" and str(doc.get("apiVersion") or "").startswith(o.WORKLOAD_API + "/"):
                _store(kind, admit_pod_group_priority(doc, classes), objs)
            elif not _store(kind, doc, objs):
                loaded.ignored[kind or "<no kind>"] = loaded.ignored.get(kind or "<no kind>", 0) + 1
        except parsing.ObjectError as exc:
            raise ManifestError(f"{source}: {exc}") from None
    try:
        dra.admit_claims(objs)
    except parsing.ObjectError as exc:
        raise ManifestError(f"{source}: {exc}") from None
    for pod in pods:
        cache.add_pod(pod)
        gangs.update_members(objs.gang_members, pod, present=True)
    load_usage(cache, node_metrics, source=source)
    objs.generation += 1
    return loaded


def load_usage(cache: SchedulerCache, node_metrics: Iterable[Mapping[str, Any]], *, source: str) -> None:
    """The measured utilisation the load-aware plugins read (``core/framework/usage.py``), from the cluster file:
    metrics.k8s.io NodeMetrics documents (``kubectl get nodemetrics -o yaml``) and the
    ``kopf-scheduler.io/usage`` node annotation (``cpu=75,memory=40``, percent; it wins over a
    NodeMetrics of the same node). Staleness is judged at the newest sample's time (an annotation's
    sample is that new); every pod in the file is in the samples, pods the simulation places are not."""
    samples: dict[str, usage.NodeUsage] = {}
    try:
        for doc in node_metrics:
            name = str((doc.get("metadata") or {}).get("name") or "")
            info = cache.get_node_info(name)
            if info is None or info.node is None:
                raise ManifestError(f"{source}: NodeMetrics {name!r}: no such Node in the file")
            samples[name] = usage.parse_node_metrics(doc, info.node, pods=frozenset(p.uid for p in info.iter_pods()))
        now = max((s.timestamp for s in samples.values()), default=0.0)
        for name in cache.node_names():
            info = cache.get_node_info(name)
            if info is None or info.node is None or usage.USAGE_ANNOTATION not in info.node.annotations:
                continue
            text = info.node.annotations[usage.USAGE_ANNOTATION]
            pods = frozenset(p.uid for p in info.iter_pods())
            samples[name] = usage.parse_usage_annotation(text, timestamp=now, pods=pods)
    except usage.UsageError as exc:
        raise ManifestError(f"{source}: {exc}") from None
    if samples:
        cache.objects.node_usage[usage.ANY_SOURCE] = usage.UsageSnapshot(samples, now, source)


def _store(kind: str, doc: Mapping[str, Any], objs: ClusterObjects) -> bool:
    """Parse an object of the other kinds the scheduler reads into `objs`; False for a kind it does not read."""
    if kind == "Service":
        s = parsing.parse_service(doc)
        objs.services[f"{s.namespace}/{s.name}"] = s
    elif kind in ("ReplicationController", "ReplicaSet", "StatefulSet"):
        c = parsing.parse_controller(doc)
        objs.controllers[f"{c.kind}/{c.namespace}/{c.name}"] = c
    elif kind == "PersistentVolume":
        pv = parsing.parse_persistent_volume(doc)
        objs.persistent_volumes[pv.name] = pv
    elif kind == "PersistentVolumeClaim":
        pvc = parsing.parse_persistent_volume_claim(doc)
        objs.persistent_volume_claims[pvc.key] = pvc
    elif kind == "StorageClass":
        sc = parsing.parse_storage_class(doc)
        objs.storage_classes[sc.name] = sc
    elif kind == "CSINode":
        cn = parsing.parse_csi_node(doc)
        objs.csi_nodes[cn.name] = cn
    elif kind == "CSIDriver":
        cd = parsing.parse_csi_driver(doc)
        objs.csi_drivers[cd.name] = cd
    elif kind == "CSIStorageCapacity":
        cap = parsing.parse_csi_storage_capacity(doc)
        objs.csi_storage_capacities[f"{cap.namespace}/{cap.name}"] = cap
    elif kind == "PodDisruptionBudget":
        pdb = parsing.parse_pod_disruption_budget(doc)
        objs.pod_disruption_budgets[f"{pdb.namespace}/{pdb.name}"] = pdb
    elif kind == "PodGroup":
        api_version = str(doc.get("apiVersion") or "")
        if api_version.startswith(o.COSCHEDULING_API + "/"):
            pg = parsing.parse_coscheduling_pod_group(doc)
        elif api_version.startswith(o.WORKLOAD_API + "/"):
            pg = parsing.parse_pod_group(doc)
        else:
            raise parsing.ObjectError(
                f"PodGroup of apiVersion {api_version!r}: "
                f"expected {o.WORKLOAD_API}/v1beta1 or {o.COSCHEDULING_API}/v1alpha1"
            )
        objs.pod_groups[pg.key] = pg
    elif kind == "Namespace":
        meta = doc.get("metadata") or {}
        objs.namespace_labels[str(meta.get("name") or "")] = dict(meta.get("labels") or {})
    else:
        return dra.load_dra_object(kind, doc, objs)
    return True


def load_pods(
    docs: Iterable[Mapping[str, Any]],
    *,
    source: str = "pods",
    priority_classes: Mapping[str, o.PriorityClass] | None = None,
) -> list[o.Pod | UnreadablePod]:
    """The pending pods of ``docs``, in file order, their priorities resolved through `priority_classes`
    (default: only the system classes). A pod that cannot be read, or that the API server would refuse,
    comes back as an ``UnreadablePod`` in its place; a document of another kind is a ``ManifestError``."""
    classes = priority_classes if priority_classes is not None else {c.name: c for c in o.SYSTEM_PRIORITY_CLASSES}
    out: list[o.Pod | UnreadablePod] = []
    for i, doc in enumerate(docs):
        if doc.get("kind") not in ("Pod", None):
            raise ManifestError(f"{source}: document {i + 1} is a {doc.get('kind')}, expected Pod")
        try:
            out.append(parsing.parse_pod(admit_priority(doc, classes)))
        except parsing.ObjectError as exc:
            out.append(UnreadablePod(_pod_key(doc) or f"document {i + 1}", str(exc)))
    return out


#: the scheduler name of today's default profile when no policy file names one
DEFAULT_SCHEDULER_NAME: Final = "kopf-scheduler"


class PolicyFileError(ValueError):
    """A policy file that cannot be read or is not a valid policy; the message names the file."""


def load_policy(
    path: str | Path | None, *, scheduler_name: str = DEFAULT_SCHEDULER_NAME, registry: Registry | None = None
) -> Profile:
    """A Profile from a SchedulingPolicy manifest or a legacy v1.9 Policy (JSON/YAML); today's default profile if
    None. `registry` names the plugins a policy may use (the installed ones: ``edge.plugins.installed_registry``;
    None: the in-tree ones)."""
    from ..core.config import legacy, policy

    if path is None:
        return policy.default_profile(scheduler_name)
    p = Path(path)
    try:
        raw: Any = yaml.safe_load(p.read_text())  # JSON is YAML
    except (OSError, yaml.YAMLError) as exc:
        raise PolicyFileError(f"{p}: cannot read policy: {exc}") from None
    if not isinstance(raw, Mapping):
        raise PolicyFileError(f"{p}: a policy must be an object")
    kind = raw.get("kind")
    if kind == "KubeSchedulerConfiguration":
        profiles = load_scheduler_config(p, registry=registry)
        if len(profiles) != 1:
            raise PolicyFileError(f"{p}: {len(profiles)} profiles: choose with simulate --config instead of --policy")
        return profiles[0]
    if kind == "SchedulingPolicy":
        spec = raw.get("spec") or {}
    elif kind in ("Policy", "ConfigMap") or "predicates" in raw or "priorities" in raw:
        converted = legacy.import_policy(raw, scheduler_name=scheduler_name)
        if isinstance(converted, list):
            raise PolicyFileError(
                f"{p}: not a valid v1.9 Policy:\n" + "\n".join(f"  {e.path}: {e.message}" for e in converted)
            )
        spec = converted
    else:
        raise PolicyFileError(f"{p}: expected kind SchedulingPolicy or Policy, got {kind!r}")
    profile = policy.validate_policy(spec, registry=registry)
    if isinstance(profile, list):
        raise PolicyFileError(f"{p}: invalid policy:\n" + "\n".join(f"  {e.path}: {e.message}" for e in profile))
    return profile


def load_scheduler_config(path: str | Path, *, registry: Registry | None = None) -> list[Profile]:
    """The profiles of a KubeSchedulerConfiguration file (``core/config/scheduler_config.py``), in file order; its
    warnings (ignored process settings) go to stderr."""
    import sys

    from ..core.config import scheduler_config

    p = Path(path)
    try:
        raw: Any = yaml.safe_load(p.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise PolicyFileError(f"{p}: cannot read configuration: {exc}") from None
    loaded = scheduler_config.load(raw, registry=registry)
    if isinstance(loaded, list):
        raise PolicyFileError(
            f"{p}: not a usable KubeSchedulerConfiguration:\n" + "\n".join(f"  {e.path}: {e.message}" for e in loaded)
        )
    profiles, warnings = loaded
    for warning in warnings:
        print(f"{p}: {warning}", file=sys.stderr)
    return profiles


def _pod_key(doc: Mapping[str, Any]) -> str:
    """ns/name of a pod document, as far as its metadata can be read ("" when it names nothing)."""
    meta = doc.get("metadata")
    if not isinstance(meta, Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
        return ""
    namespace = meta.get("namespace")
    return f"{namespace if isinstance(namespace, str) and namespace else 'default'}/{meta['name']}"
