"""The plugin author's test kit: build nodes and pods, run one plugin on them, run whole scheduling cycles.

What ``kopf_scheduler.framework`` is for writing a plugin, this module is for testing one (as upstream's
``pkg/scheduler/testing`` and framework runtime serve in-tree plugins and scheduler-plugins). Import these
two, nothing else of ``kopf_scheduler``: the rest may change under you. See docs/plugins.md, "Testing a
plugin".

- **Builders**: ``make_pod("web").req(cpu="500m").label(app="web")`` and ``make_node("n1").capacity(cpu="4")
  .label(zone="a")`` write API bodies fluently (the methods of ``kopf_scheduler.cluster.bodies``, after
  upstream's ``MakePod().Req(...).Obj()``), with test defaults: a fresh uid, namespace "default", phase
  Pending; a 4-cpu, 32Gi, 110-pod, Ready node. ``obj()`` is the body parsed by the parser the operator
  runs on what it watches (a ``Pod``, a ``Node``), ``raw()`` the body itself. ``node_info(node, *pods)``
  puts pods on a node; ``make_pod_group`` and ``make_coscheduling_group`` build the PodGroups gangs read.
  Every other object a plugin reads (Services, ReplicaSets, volumes, PDBs, namespaces, PriorityClasses,
  DRA objects...) is given as its API body, and read by the same loader as ``kopf-scheduler simulate``'s
  cluster file (``read_manifests`` reads such a file).
- **One plugin**: ``run_plugin(plugin, pod, nodes=..., pods=...)`` runs the plugin's PreFilter, Filter,
  PreScore, Score and NormalizeScore for `pod` over a snapshot of those nodes and the pods on them, through
  the scheduler's own runtime (``core/scheduling/algorithm.py``: a SKIP, ``admit_only``, a vector form, an exception
  turned into an error naming the plugin all behave as in the operator), and returns a ``PluginRun``: each
  node's status and each feasible node's score. Unlike the operator it visits every node and scores every
  feasible one (``GenericScheduler(exhaustive=True)``), so that each has its verdict.
- **Whole cycles**: ``Cluster(nodes=..., pods=..., profile=...)`` holds a cluster in memory and schedules
  pending pods with ``schedule(*pods)``: the cycle the operator runs (``core/scheduling/cycle.py``: queue, filter,
  score, preemption, Reserve, Permit, PreBind, Bind), carried out as ``simulate`` carries it out
  (``sim/simulator.py``), the binding cycle's plugins talking to an in-memory API server. A profile is
  ``profile(*plugins)`` (exactly those plugins) or ``policy(spec, plugins=[...])`` (a SchedulingPolicy
  validated as the operator validates it, with your plugin classes installed beside the built-in ones).

Nothing here needs a cluster, Kopf or an event loop, or does I/O but ``read_manifests`` and ``policy``
given a path.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .cluster.bodies import NodeBody, PodBody, Quantity, resource_list
from .core.config.policy import FieldError, validate_policy
from .core.config.profile import Profile
from .core.config.registry import Registry
from .core.framework.basics import SUCCESS, Status
from .core.framework.interface import (
    FilterPlugin,
    Plugin,
    PostFilterPlugin,
    PreFilterPlugin,
    QueueSortPlugin,
    ScorePlugin,
)
from .core.framework.nodeinfo import NodeInfo, node_info_of
from .core.model import paths
from .core.model.objects import Node, Pod, PodGroup
from .core.model.parsing import parse_coscheduling_pod_group, parse_node, parse_pod, parse_pod_group
from .core.plugins.default_binder import DefaultBinder
from .core.plugins.priority_sort import PrioritySort
from .core.scheduling.algorithm import GenericScheduler
from .core.toolkit import gangs
from .sim.loader import DEFAULT_SCHEDULER_NAME, LoadedCluster, load_cluster, load_pods, load_policy, read_documents
from .sim.simulator import Placement, Simulation, UnreadablePod

__all__ = [
    "Cluster",
    "FieldError",
    "NodeBuilder",
    "NodeLike",
    "Placement",
    "PluginRun",
    "PodBuilder",
    "PodLike",
    "PolicyError",
    "Profile",
    "make_coscheduling_group",
    "make_node",
    "make_pod",
    "make_pod_group",
    "node_info",
    "policy",
    "profile",
    "read_manifests",
    "run_plugin",
]

#: where ``policy`` says the plugins it was given come from (``Registry.origins``)
_ORIGIN: Final = "kopf_scheduler.testing"

_uids = itertools.count(1)


# --------------------------------------------------------------------------- builders


class PodBuilder(PodBody):
    """A pod body with test defaults (namespace "default", a fresh uid, phase Pending); ``obj()`` parses it."""

    default_image = "pause"

    def __init__(self, name: str, namespace: str = "default") -> None:
        super().__init__(name, namespace)
        self.uid(f"uid-{name}-{next(_uids)}").phase("Pending")

    def init_host_port(self, port: int, *, restartable: bool = True) -> PodBuilder:
        """An init container (a sidecar unless ``restartable`` is False) with a host port."""
        return self.init_container(restartable=restartable, host_port=port)

    def container_status(
        self,
        name: str,
        *,
        actual: dict[str, Quantity] | None = None,
        allocated: dict[str, Quantity] | None = None,
        init: bool = False,
    ) -> PodBuilder:
        """A status entry for container ``name``: ``resources.requests`` (what runs) and ``allocatedResources``."""
        cs: dict[str, Any] = {"name": name}
        if actual is not None:
            cs["resources"] = {"requests": resource_list(**actual)}
        if allocated is not None:
            cs["allocatedResources"] = resource_list(**allocated)
        self.body["status"].setdefault("initContainerStatuses" if init else "containerStatuses", []).append(cs)
        return self

    def pod_status_resources(
        self, *, actual: dict[str, Quantity] | None = None, allocated: dict[str, Quantity] | None = None
    ) -> PodBuilder:
        """Pod-level ``status.resources.requests`` and ``status.allocatedResources``."""
        if actual is not None:
            self.body["status"]["resources"] = {"requests": resource_list(**actual)}
        if allocated is not None:
            self.body["status"]["allocatedResources"] = resource_list(**allocated)
        return self

    def resize_pending(self, reason: str) -> PodBuilder:
        """A PodResizePending condition (reason Deferred or Infeasible)."""
        return self.condition("PodResizePending", "True", reason)

    def raw(self) -> dict[str, Any]:
        """The body (a copy: the builder can go on)."""
        return super().obj()

    def obj(self) -> Pod:  # type: ignore[override]  # the parsed Pod (``raw()`` is the body)
        """The body parsed as the operator parses a pod it watches."""
        return parse_pod(self.body)


class NodeBuilder(NodeBody):
    """A node body with test defaults (uid, hostname label, 4 cpu, 32Gi, 110 pods, Ready); ``obj()`` parses it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.uid(f"uid-{name}").hostname().capacity(cpu="4", memory="32Gi", pods="110").ready()

    def raw(self) -> dict[str, Any]:
        """The body (a copy: the builder can go on)."""
        return super().obj()

    def obj(self) -> Node:  # type: ignore[override]  # the parsed Node (``raw()`` is the body)
        """The body parsed as the operator parses a node it watches."""
        return parse_node(self.body)


def make_pod(name: str = "pod", namespace: str = "default") -> PodBuilder:
    """A pending pod's builder: ``make_pod("web").req(cpu="1").label(app="web").obj()``."""
    return PodBuilder(name, namespace)


def make_node(name: str = "node") -> NodeBuilder:
    """A Ready node's builder: ``make_node("n1").capacity(cpu="8").label(zone="a").taint("k", "v").obj()``."""
    return NodeBuilder(name)


#: a node as the kit takes it: parsed, a builder, or an API body
NodeLike = Node | NodeBuilder | Mapping[str, Any]
#: a pod as the kit takes it: parsed, a builder, or an API body
PodLike = Pod | PodBuilder | Mapping[str, Any]


def node_info(node: NodeLike, *pods: PodLike) -> NodeInfo:
    """A NodeInfo (what Filter and Score get) for `node` with `pods` on it (their nodeName set to it)."""
    parsed = _node(node)
    on = (_pod(p) for p in pods)
    return node_info_of(parsed, *(p if p.node_name == parsed.name else p.with_node(parsed.name) for p in on))


def make_pod_group(
    name: str,
    min_count: int,
    *,
    namespace: str = "default",
    basic: bool = False,
    priority: int | None = None,
    disruption: str | None = None,
) -> PodGroup:
    """A ``scheduling.k8s.io/v1beta1`` PodGroup with a gang policy of `min_count` (or a basic policy), parsed;
    `priority` is its ``spec.priority`` (what the Priority admission writes), `disruption` its
    ``spec.disruptionMode`` (``"all"`` or ``"single"``). Pods join it with ``.scheduling_group(name)``."""
    policy = {"basic": {}} if basic else {"gang": {"minCount": min_count}}
    spec: dict[str, Any] = {"schedulingPolicy": policy}
    if priority is not None:
        spec["priority"] = priority
    if disruption is not None:
        spec["disruptionMode"] = {disruption: {}}
    body = {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace, "uid": f"pg-{name}"},
        "spec": spec,
    }
    return parse_pod_group(body)


def make_coscheduling_group(
    name: str, min_member: int, *, namespace: str = "default", timeout: int | None = None
) -> PodGroup:
    """A ``scheduling.x-k8s.io/v1alpha1`` PodGroup (scheduler-plugins' coscheduling), parsed. Pods join it
    with ``.pod_group(name)``."""
    spec: dict[str, Any] = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    body = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    return parse_coscheduling_pod_group(body)


def read_manifests(path: str | Path) -> list[Mapping[str, Any]]:
    """The objects of a YAML file (several documents, ``kind: List`` flattened), as ``simulate`` reads its
    files: for ``Cluster(objects=...)`` and ``Cluster.schedule``."""
    return read_documents(path)


def _node(node: NodeLike) -> Node:
    if isinstance(node, Node):
        return node
    if isinstance(node, NodeBuilder):
        return node.obj()
    return parse_node(node)


def _pod(pod: PodLike) -> Pod:
    if isinstance(pod, Pod):
        return pod
    if isinstance(pod, PodBuilder):
        return pod.obj()
    return parse_pod(pod)


# --------------------------------------------------------------------------- the cluster a test starts from


def _load(
    nodes: Iterable[NodeLike], pods: Iterable[PodLike], objects: Iterable[Mapping[str, Any] | PodGroup]
) -> LoadedCluster:
    """A scheduler cache holding `nodes`, the bound `pods` and `objects`: bodies through ``simulate``'s
    loader (the Priority admission included), parsed objects as they are."""
    bodies: list[Mapping[str, Any]] = []
    parsed_nodes: list[Node] = []
    parsed_pods: list[Pod] = []
    groups: list[PodGroup] = []
    for node in nodes:
        if isinstance(node, Node):
            parsed_nodes.append(node)
        else:
            bodies.append(node.raw() if isinstance(node, NodeBuilder) else {"kind": "Node", **node})
    for pod in pods:
        if isinstance(pod, Pod):
            parsed_pods.append(pod)
        else:
            bodies.append(pod.raw() if isinstance(pod, PodBuilder) else {"kind": "Pod", **pod})
    for obj in objects:
        if isinstance(obj, PodGroup):
            groups.append(obj)
        else:
            bodies.append(obj)
    loaded = load_cluster(bodies, source="kopf_scheduler.testing")
    unbound = [p.key for p in (*loaded.pending_in_cluster, *(p for p in parsed_pods if not p.node_name))]
    if unbound:
        raise ValueError(
            f"pods already on nodes name their node (spec.nodeName): {', '.join(unbound)} do not; "
            "schedule pending pods with run_plugin's pod or Cluster.schedule"
        )
    cache, objs = loaded.cache, loaded.cache.objects
    for n in parsed_nodes:
        cache.add_node(n)
    for p in parsed_pods:
        cache.add_pod(p)
        gangs.update_members(objs.gang_members, p, present=True)
    for group in groups:
        objs.pod_groups[group.key] = group
    objs.generation += 1
    return loaded


def _pending(pods: Iterable[PodLike], loaded: LoadedCluster) -> list[Pod]:
    """`pods` as the API server stores them (the Priority admission with the cluster's PriorityClasses), parsed."""
    out: list[Pod] = []
    for pod in pods:
        if isinstance(pod, Pod):
            out.append(pod)
            continue
        body = pod.raw() if isinstance(pod, PodBuilder) else {"kind": "Pod", **pod}
        (read,) = load_pods([body], source="kopf_scheduler.testing", priority_classes=loaded.priority_classes)
        if isinstance(read, UnreadablePod):
            raise ValueError(f"{read.key}: {read.message}")
        out.append(read)
    return out


# --------------------------------------------------------------------------- one plugin


@dataclass(frozen=True, slots=True)
class PluginRun:
    """What one plugin made of a pod on every node (``run_plugin``).

    ``statuses``: every node of the snapshot, in the order the scheduler visits them (the snapshot's:
    zones interleaved, otherwise as given), to SUCCESS when it passed the plugin's PreFilter and Filter,
    else the status that rejected it (its ``plugin`` is the plugin's name; a PreFilter's rejection, or
    the nodes an ``admit_only`` left out, give every such node the same status). ``feasible``: the nodes
    that passed. ``scores``: each feasible node's score after NormalizeScore (0..100), ``raw_scores``
    what Score returned; both empty for a plugin that does not score, or whose PreScore answered SKIP
    (``score_skipped``: the node totals get nothing from it). ``filter_skipped``: its PreFilter answered
    SKIP (its Filter was not called; every node passed it). ``message``: what a FailedScheduling event
    would say when no node passed (``0/3 nodes are available: 3 node(s) were not GPU-ready.``), else "".
    ``error``: the runtime's error when the plugin raised or answered ERROR (as the operator reports it:
    the attempt stops there, and nothing else is reported).
    """

    statuses: Mapping[str, Status]
    scores: Mapping[str, int]
    raw_scores: Mapping[str, int]
    filter_skipped: bool = False
    score_skipped: bool = False
    message: str = ""
    error: str | None = None

    @property
    def feasible(self) -> list[str]:
        """The nodes that passed PreFilter and Filter, in visiting order."""
        return [name for name, status in self.statuses.items() if status.is_success]


def run_plugin(
    plugin: Plugin,
    pod: PodLike,
    *,
    nodes: Iterable[NodeLike] = (),
    pods: Iterable[PodLike] = (),
    objects: Iterable[Mapping[str, Any] | PodGroup] = (),
) -> PluginRun:
    """Run `plugin`'s PreFilter, Filter, PreScore, Score and NormalizeScore (those it implements) for the
    pending `pod` over a snapshot of `nodes`, with the bound `pods` on their nodes and the other cluster
    `objects` (API bodies, or PodGroups from ``make_pod_group``), as the scheduler's runtime runs them;
    see ``PluginRun``. A Reserve, Permit, PreBind or Bind plugin runs in a ``Cluster``."""
    filters = (plugin,) if isinstance(plugin, FilterPlugin) else ()
    pre_filters = (plugin,) if isinstance(plugin, PreFilterPlugin) and not filters else ()
    scorers = ((plugin, 1),) if isinstance(plugin, ScorePlugin) else ()
    if not (filters or pre_filters or scorers):
        raise TypeError(
            f"{type(plugin).__name__} is not a PreFilter, Filter or Score plugin: "
            "run the other extension points in a Cluster"
        )
    loaded = _load(nodes, pods, objects)
    (target,) = _pending([pod], loaded)
    one = Profile(
        DEFAULT_SCHEDULER_NAME, filters=filters, pre_filter_only=pre_filters, scorers=scorers, plugins=(plugin,)
    )
    scheduler = GenericScheduler(one, exhaustive=True)
    snapshot = loaded.cache.snapshot()
    result = scheduler.schedule(target, snapshot, rng=random.Random(0), post_filter=False)
    if result.error is not None:
        return PluginRun(statuses={}, scores={}, raw_scores={}, error=result.error)
    names = snapshot.table.names
    passed = [names[k] for k in result.scored.tolist()] if result.scored is not None else []
    chosen = set(passed)
    statuses = {name: SUCCESS if name in chosen else result.diagnosis.status_of(name) for name in names}
    scores: dict[str, int] = {}
    raw: dict[str, int] = {}
    for name, _, raw_scores, normalised in result.plugin_scores:
        if name == plugin.name:
            raw = dict(zip(passed, raw_scores.tolist()))
            scores = dict(zip(passed, normalised.tolist()))
    state = result.state
    return PluginRun(
        statuses=statuses,
        scores=scores,
        raw_scores=raw,
        filter_skipped=state is not None and plugin.name in state.skip_filter,
        score_skipped=bool(scorers) and bool(passed) and not scores,
        message="" if passed else result.diagnosis.message(),
    )


# --------------------------------------------------------------------------- profiles


def profile(*plugins: Plugin | tuple[ScorePlugin, int], scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> Profile:
    """A profile of exactly `plugins`, each at every extension point it implements, in the order given:
    filters, PreFilters, scores (a ``(plugin, weight)`` pair for a weight other than its
    ``DEFAULT_WEIGHT``), PostFilters (preemption only when one is given: ``DefaultPreemption`` is in the
    framework's registry, not here), Reserve, Permit, PreBind and Bind, then DefaultBinder. A QueueSort
    plugin among them orders the queue (PrioritySort otherwise). Use ``policy`` to build one as a
    SchedulingPolicy would, with the defaults it brings."""
    weights: dict[int, int] = {}
    instances: list[Plugin] = []
    for entry in plugins:
        plugin, weight = entry if isinstance(entry, tuple) else (entry, None)
        if not isinstance(plugin, Plugin):
            raise TypeError(f"not a plugin: {plugin!r}")
        if weight is not None:
            if not isinstance(plugin, ScorePlugin):
                raise TypeError(f"{plugin!r} has a weight but is not a ScorePlugin")
            weights[id(plugin)] = weight
        instances.append(plugin)
    names = [p.name for p in instances]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"two plugins are named {', '.join(twice)}: give one a name= of its own")
    sorts = [p for p in instances if isinstance(p, QueueSortPlugin)]
    if len(sorts) > 1:
        raise ValueError(f"one QueueSort plugin orders a profile's queue, not {len(sorts)}")
    every = [*instances, *(() if any(isinstance(p, DefaultBinder) for p in instances) else (DefaultBinder(),))]
    return Profile(
        scheduler_name,
        filters=tuple(p for p in instances if isinstance(p, FilterPlugin)),
        pre_filter_only=tuple(
            p for p in instances if isinstance(p, PreFilterPlugin) and not isinstance(p, FilterPlugin)
        ),
        scorers=tuple((p, weights.get(id(p), p.DEFAULT_WEIGHT)) for p in instances if isinstance(p, ScorePlugin)),
        post_filters=tuple(p for p in instances if isinstance(p, PostFilterPlugin)),
        plugins=tuple(every),
        source="kopf_scheduler.testing.profile",
        queue_sort=sorts[0] if sorts else PrioritySort(),
    )


class PolicyError(ValueError):
    """The operator would refuse the policy (its condition Accepted=False): ``errors``, each a ``path`` in the
    spec (``spec.priorities[0].argument.label``) and a ``message``."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        super().__init__("invalid policy: " + "; ".join(map(str, self.errors)))


def policy(spec: Mapping[str, Any] | str | Path, *, plugins: Iterable[type[Plugin]] = ()) -> Profile:
    """The profile the operator runs for a SchedulingPolicy, with `plugins` installed beside the built-in ones
    (as pip-installing their package and its entry points does). `spec` is the policy's ``spec``, a whole
    SchedulingPolicy manifest, or a file holding one. Raises ``PolicyError`` when the operator would refuse
    it, ``ValueError`` when one of `plugins` could not be installed (its name is taken, or it is not a
    ``Plugin`` with a ``NAME``). A file may also hold a v1.9 Policy or a KubeSchedulerConfiguration of one
    profile, as ``simulate --policy`` reads them (then any problem is a ``ValueError`` saying what)."""
    registry = Registry.in_tree().extended([(cls, _ORIGIN) for cls in plugins])
    if registry.problems:
        raise ValueError("; ".join(registry.problems.values()))
    if isinstance(spec, (str, Path)):
        docs = read_documents(spec)
        if len(docs) != 1 or docs[0].get("kind") != "SchedulingPolicy":  # a v1.9 Policy, a configuration
            return load_policy(spec, registry=registry)
        spec = docs[0]
    if spec.get("kind") == "SchedulingPolicy":
        spec = spec.get("spec") or {}
    built = validate_policy(spec, registry=registry)
    if isinstance(built, list):
        raise PolicyError(built)
    return built


# --------------------------------------------------------------------------- whole cycles


class Cluster:
    """A cluster held in memory and a scheduler over it: the operator's scheduling and binding cycles, run
    as ``kopf-scheduler simulate`` runs them (``sim/simulator.py``).

    `nodes`, the bound `pods` and the other `objects` (API bodies of any kind the scheduler reads, a
    cluster file's documents from ``read_manifests``: Nodes and bound Pods too) make the cluster;
    `profile` schedules (``profile(...)`` or ``policy(...)``; today's upstream default profile when None).
    Pods are created by ``schedule``; the binding cycle's plugins (PreBind, Bind, DefaultBinder) talk to an
    in-memory API server holding the cluster's pods, nodes and ResourceClaims: ``pod`` reads a pod back from it,
    ``requests`` lists what they asked. Ties between equal scores are broken with ``random.Random(seed)``.
    """

    def __init__(
        self,
        *,
        nodes: Iterable[NodeLike] = (),
        pods: Iterable[PodLike] = (),
        objects: Iterable[Mapping[str, Any] | PodGroup] = (),
        profile: Profile | None = None,
        seed: int = 0,
    ) -> None:
        self._loaded = _load(nodes, pods, objects)
        chosen = profile if profile is not None else load_policy(None)
        self._simulation = Simulation(self._loaded.cache, chosen, seed=seed)

    def schedule(self, *pods: PodLike) -> list[Placement]:
        """Create the pending `pods`, in order, each once the scheduler has settled the one before (placed,
        rejected, or waiting at Permit), and schedule them as the operator would; their placements, in the
        same order. A pod still waiting at Permit at the end times out, as nothing else will come; one that
        did not fit may be placed later, when a later pod's placement or preemption makes room."""
        return self._simulation.run(_pending(pods, self._loaded)).placements

    def pod(self, name: str, namespace: str = "default") -> dict[str, Any]:
        """The pod's body as the API server now holds it: bound (``spec.nodeName``), with what the PreBind
        and Bind plugins wrote. KeyError when there is no such pod."""
        answer = self._simulation.api.answer("GET", paths.pod(namespace, name))
        if not answer.ok:
            raise KeyError(f"{namespace}/{name}: {answer.detail()}")
        body: dict[str, Any] = answer.body
        return body

    @property
    def requests(self) -> list[tuple[str, str, Any]]:
        """Every request the binding cycle's plugins sent, in order: (method, path, body)."""
        return list(self._simulation.api.requests)

    def node(self, name: str) -> NodeInfo:
        """The node with the pods the scheduler holds on it (bound, or assumed while they wait at Permit), a
        copy. KeyError when there is no such node."""
        info = self._loaded.cache.get_node_info(name)
        if info is None or info.node is None:
            raise KeyError(name)
        return info.clone()
