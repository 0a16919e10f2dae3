"""The plugin framework's extension points, the classes plugins subclass (statuses and typed cycle state, which
every room of the core needs, live in the leaf ``basics.py``).

Mirrors upstream ``pkg/scheduler/framework/interface.go`` in our own shape:

- ``Status`` (``basics.py``) is a value: a ``Code``, the reasons a user reads, and the plugin that produced it
  (stamped by the runtime, not by the plugin).
- A plugin is a subclass of ``Plugin`` and of every extension point it implements
  (``FilterPlugin``, ``ScorePlugin``...). The runtime dispatches with ``isinstance``, once per
  profile, never per pod. ``NAME`` is the registered name (written once, on the class); an
  instance may carry another ``name`` when a policy configures the class twice.
- Arguments are a frozen dataclass per plugin (``Plugin.Args``), parsed and validated by
  ``core/framework/arguments.py``; errors name the field path. A plugin names their type on its extension
  points (``ScorePlugin[FooArgs]``), so that ``self.args`` is typed for it and ``Args`` follows.
- Cycle state is typed (``basics.py``): a plugin creates ``StateKey[T]`` objects and reads back exactly ``T``.
- Two shapes per point where speed matters: the reference per-node method (``filter``, ``score``)
  that states the semantics, and an optional vectorised capability over the snapshot's
  ``NodeTable`` (``VectorFilter.filter_nodes``, ``VectorScore.score_nodes``) that must agree with
  it and exists because a Python loop over thousands of nodes per pod is too slow. Tests check
  the two against each other.
- ``PostFilterPlugin`` runs when no node fits; it gets a ``Handle`` onto the cycle (the filters
  with nominated pods, the PreFilterExtensions, the nominated pods, the RNG), as upstream plugins
  get ``fwk.Handle``, and returns a ``PostFilterResult`` (a nomination and the victims to evict).
- ``ReservePlugin`` and ``PermitPlugin`` run once a node is chosen and the pod assumed there
  (``core/scheduling/cycle.py``); they get a ``PermitHandle`` onto the pods waiting at Permit
  (``core/framework/waiting.py``, upstream's waitingPodsMap) and the scheduler's cache, as upstream plugins
  get ``fwk.Handle``. A Permit plugin may answer WAIT with a timeout: the pod stays assumed and
  waits until every waiting plugin allows it (then it is bound) or one rejects it or the timeout
  passes (then every Reserve plugin's ``unreserve`` runs, in reverse order, and it is requeued).
- ``PreBindPlugin`` declares a pre-flight (``pre_bind_pre_flight``, upstream's ``PreBindPreFlight``):
  pure and synchronous, it says before the binding cycle whether the plugin's PreBind has work for
  the pod on its node (SUCCESS) or none (SKIP: its PreBind is not called). When one has work, or the
  pod waits at Permit, the pod's ``status.nominatedNodeName`` is set to its node before binding
  (upstream's NominatedNodeNameForExpectation), so that autoscalers and other schedulers see where
  it is going; the binding clears it (ClearingNominatedNodeNameAfterBinding, the API server's part).
- ``PreBindPlugin`` and ``BindPlugin`` are the only asynchronous points: the binding cycle
  (``core/scheduling/cycle.py``: ``run_pre_bind_plugins``, ``run_bind_plugins``) awaits them with an
  ``ApiClient`` the executor lends: the operator's API client, or the simulation's in-memory API
  server. DefaultBinder (``core/plugins/default_binder.py``) is every profile's last Bind plugin.
  Nothing here does I/O of its own.
- ``SignPlugin`` (upstream's ``SignPlugin``, for OpportunisticBatching): a PreFilter, Filter, PreScore or
  Score plugin says which parts of a pod its verdicts depend on (``sign_pod``), or that it cannot tell
  (a ``Status``: the pod is not signable, e.g. pod affinity or spread constraints). Two pods with the
  same signature get the same verdicts and scores on the same nodes, so the next one may reuse the
  previous one's ranking (``core/toolkit/batching.py``); a profile with a plugin that is not a ``SignPlugin``
  (or with extenders) signs no pod.
- ``QueueSortPlugin`` orders the active queue (one per profile; PrioritySort by default).
  ``EnqueueExtensions`` says which ``ClusterEvent``s can make a pod the plugin rejected schedulable,
  each with an optional ``QueueingHint`` function; the queue asks the plugins that rejected a pod
  (``core/state/queueing.py``), and a plugin that declares nothing gets every event. ``PreEnqueuePlugin``
  keeps a pod out of the active queue (gated) until it passes.

Scores are integers in ``0..MAX_NODE_SCORE`` after normalisation.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, Self, get_args, get_origin

import typing_extensions

from .arguments import NoArgs, PluginArgsError, parse_args
from .basics import MAX_NODE_SCORE, SUCCESS, CycleState, Status

if TYPE_CHECKING:
    import random
    from collections.abc import Sequence

    import numpy as np
    import numpy.typing as npt

    from ..model.objects import Pod
    from .basics import QueuedPodInfo
    from .diagnosis import Diagnosis
    from .nodeinfo import NodeInfo
    from .snapshot import ClusterObjects, NodeTable, Snapshot
    from .waiting import WaitingPod

__all__ = [
    "ApiClient",
    "ApiResponse",
    "BindPlugin",
    "Candidate",
    "ClusterEvent",
    "ClusterEventWithHint",
    "EnqueueExtensions",
    "EnqueueHandle",
    "FilterPlugin",
    "Handle",
    "NormalizeScorePlugin",
    "PermitHandle",
    "PermitPlugin",
    "PermitResult",
    "Plugin",
    "PluginArgsError",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreScorePlugin",
    "QueueSortPlugin",
    "QueueingHint",
    "QueueingHintFn",
    "ReservePlugin",
    "ScorePlugin",
    "SignFragment",
    "SignPlugin",
    "VectorFilter",
    "VectorScore",
    "default_normalize",
]

#: a plugin's arguments type (``Plugin[FooArgs]``). Unparameterised (``FilterPlugin``) means ``Any``, so plugins
#: that never name their arguments type check as before (a default is PEP 696: ``typing.TypeVar`` has it from
#: Python 3.13, ``typing_extensions`` before)
ArgsT = typing_extensions.TypeVar("ArgsT", default=Any)


# --------------------------------------------------------------------------- plugins


class Plugin(abc.ABC, Generic[ArgsT]):
    """Every plugin subclasses this and at least one extension point below.

    ``NAME`` is the name policies use; ``Args`` the frozen dataclass of its arguments (``NoArgs``
    when it takes none). A plugin with arguments names their type on the extension points it
    subclasses, ``class Foo(FilterPlugin[FooArgs], ScorePlugin[FooArgs])``: ``self.args`` is then a
    ``FooArgs`` to type checkers, ``Foo(FooArgs(...))`` is checked, and ``Args`` is set from it (a
    class that also sets ``Args`` must set the same type; two different types are refused when the
    class is defined). A plugin that names none (``class Foo(FilterPlugin)``, with ``Args = FooArgs``)
    still works: its ``args`` is ``Any`` to type checkers. A subclass that takes arguments takes them
    as its first parameter: ``def __init__(self, args: FooArgs | None = None, *, name: str | None =
    None)``. ``new`` builds a plugin from raw policy arguments, which is what the policy builder and
    tests of raw input use.
    """

    NAME: ClassVar[str]
    #: the arguments' dataclass (a class variable cannot be generic: ``self.args`` carries the type)
    Args: ClassVar[type[Any]] = NoArgs

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        named = _named_args(cls)
        if named is None:
            return
        own = cls.__dict__.get("Args")
        if own is not None and own is not named:
            raise TypeError(f"{cls.__name__} sets Args = {own.__name__} but its extension points name {named.__name__}")
        cls.Args = named

    def __init__(self, args: ArgsT | None = None, *, name: str | None = None) -> None:
        if args is not None and not isinstance(args, self.Args):
            raise TypeError(f"{type(self).__name__} takes {self.Args.__name__}, not {type(args).__name__}")
        self.name: str = name or self.NAME
        #: the parsed arguments (an instance of ``Args``)
        self.args: ArgsT = args if args is not None else self.Args()

    @classmethod
    def new(cls, raw: Mapping[str, Any] | None = None, *, name: str | None = None) -> Self:
        """Parse ``raw`` into ``cls.Args`` (``PluginArgsError`` names the field) and build the plugin."""
        return cls(parse_args(cls.Args, raw), name=name)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})" if self.name != self.NAME else f"{type(self).__name__}()"


def _named_args(cls: type) -> type | None:
    """The arguments type `cls`'s own bases name (``FilterPlugin[FooArgs]``), or None when they name none;
    a TypeError when they name two."""
    named: set[type] = set()
    for base in cls.__dict__.get("__orig_bases__", ()):
        origin = get_origin(base)
        if isinstance(origin, type) and issubclass(origin, Plugin):
            named.update(arg for arg in get_args(base) if isinstance(arg, type))
    if len(named) > 1:
        names = ", ".join(sorted(t.__name__ for t in named))
        raise TypeError(f"{cls.__name__} names two arguments types on its extension points: {names}")
    return next(iter(named), None)


class PreFilterPlugin(Plugin[ArgsT]):
    @abc.abstractmethod
    def pre_filter(self, state: CycleState, pod: Pod, snapshot: Snapshot) -> Status:
        """Compute per-pod data. SKIP disables this plugin's filter for the pod; a rejection fails every node."""


class PreFilterExtensions(PreFilterPlugin[ArgsT]):
    """Keep pre-filter state right when a what-if adds or removes pods (preemption, nominated pods).

    Upstream ``PreFilterExtensions.AddPod / RemovePod``: called on a cloned ``CycleState`` after
    ``pre_filter``, with the NodeInfo the pod is added to or removed from. Replace state entries;
    never mutate them (the original cycle still reads them).
    """

    @abc.abstractmethod
    def add_pod(self, state: CycleState, pod: Pod, added: Pod, node: NodeInfo) -> Status: ...

    @abc.abstractmethod
    def remove_pod(self, state: CycleState, pod: Pod, removed: Pod, node: NodeInfo) -> Status: ...


class FilterPlugin(Plugin[ArgsT]):
    @abc.abstractmethod
    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        """Whether ``pod`` fits ``node``; a rejection names the reason users read."""


class VectorFilter(FilterPlugin[ArgsT]):
    """Optional capability: ``filter`` over many nodes at once, equal to ``filter(...).is_success`` per node."""

    @abc.abstractmethod
    def filter_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.bool_]:
        """The feasibility of the nodes ``index`` (positions in the table)."""

    def filter_statuses(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> tuple[Sequence[Status], npt.NDArray[np.intp]] | None:
        """Optional: what ``filter`` says of the nodes ``index`` (all of them rejected by ``filter_nodes``)
        in one pass: the distinct statuses, and per node the position of its own among them.

        Asked only to say why nodes were rejected (the FitError, preemption, explanations), which for a
        pod that fits nowhere is every node: one vector pass instead of a Python call per node. None
        (the default) asks ``filter`` node by node."""
        return None


@dataclass(frozen=True, slots=True)
class Candidate:
    """A node the pod would fit on once ``victims`` (most important first) are gone."""

    node: str
    victims: tuple[Pod, ...]
    num_pdb_violations: int = 0


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """What the PostFilter stage (preemption) decided.

    ``nominated_node`` is upstream's NominatingInfo: None leaves the pod's nomination as it is
    (upstream's nil result), "" clears it, a node name nominates the pod there; ``victims`` are
    the pods to evict for it. ``candidates`` and ``node_statuses`` say what was considered (for
    explanations): the nodes with room once their victims go, and why the other nodes tried gave none.
    """

    status: Status
    nominated_node: str | None = None
    victims: tuple[Pod, ...] = ()
    candidates: tuple[Candidate, ...] = ()
    node_statuses: Mapping[str, Status] = field(default_factory=dict)


class Handle(Protocol):
    """What the runtime lends a PostFilter plugin for one cycle: the part of upstream ``fwk.Handle``
    preemption uses. Every method runs this profile's plugins on the state and node given."""

    @property
    def rng(self) -> random.Random:
        """The cycle's random source (upstream draws the candidate offset from math/rand)."""

    def nominated_pods_for_node(self, node_name: str) -> Sequence[Pod]: ...

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        """The filters on ``node`` with the nominated pods of equal or higher priority counted (and without)."""

    def run_pre_filter_extension_add_pod(self, state: CycleState, pod: Pod, added: Pod, node: NodeInfo) -> Status: ...

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: Pod, removed: Pod, node: NodeInfo
    ) -> Status: ...


class PostFilterPlugin(Plugin[ArgsT]):
    @abc.abstractmethod
    def post_filter(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, diagnosis: Diagnosis, handle: Handle
    ) -> PostFilterResult:
        """Called when no node fits; may make room (upstream DefaultPreemption). ``diagnosis`` holds
        every node's rejection; ``state`` is the cycle's (clone it before changing it)."""


class PreScorePlugin(Plugin[ArgsT]):
    @abc.abstractmethod
    def pre_score(self, state: CycleState, pod: Pod, nodes: list[NodeInfo], snapshot: Snapshot) -> Status:
        """SKIP disables this plugin's score for the pod (every node scores 0 for it)."""


class ScorePlugin(Plugin[ArgsT]):
    #: the weight a policy gets when it names the plugin without one
    DEFAULT_WEIGHT: ClassVar[int] = 1

    @abc.abstractmethod
    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        """A raw score for one feasible node (normalised afterwards when ``NormalizeScorePlugin``)."""


class VectorScore(ScorePlugin[ArgsT]):
    """Optional capability: ``score`` over many nodes at once, equal to it per node."""

    @abc.abstractmethod
    def score_nodes(
        self, state: CycleState, pod: Pod, table: NodeTable, index: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]: ...


class NormalizeScorePlugin(ScorePlugin[ArgsT]):
    @abc.abstractmethod
    def normalize_scores(self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Map raw scores of the feasible nodes onto 0..MAX_NODE_SCORE (may work in place)."""


class PermitHandle(Protocol):
    """What the runtime lends Reserve and Permit plugins (the part of upstream ``fwk.Handle`` they use).

    ``allow`` and ``reject`` only record the verdict on a waiting pod; the runtime binds or requeues
    it after the plugin returns.
    """

    @property
    def objects(self) -> ClusterObjects:
        """The cluster objects (PodGroups, gang members...) as the cache holds them now."""

    def iterate_waiting_pods(self) -> Iterable[WaitingPod[Any]]:
        """Every pod still waiting at Permit."""

    def get_waiting_pod(self, uid: str) -> WaitingPod[Any] | None: ...

    def allow(self, uid: str, plugin: str) -> None: ...

    def reject(self, uid: str, plugin: str, message: str) -> None: ...

    def is_placed(self, uid: str) -> bool:
        """Whether the pod holds a node in the cache: assumed (waiting, or binding) or bound."""


class ReservePlugin(Plugin[ArgsT]):
    @abc.abstractmethod
    def reserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> Status:
        """The pod is assumed on `node_name`; a failure undoes the attempt (every ``unreserve`` runs)."""

    @abc.abstractmethod
    def unreserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> None:
        """The attempt is undone (a later Reserve or Permit failed, the wait was rejected or timed out,
        the bind failed): release what ``reserve`` took. Called before the pod leaves the cache."""


@dataclass(frozen=True, slots=True)
class PermitResult:
    """SUCCESS, a rejection, or WAIT up to ``timeout`` seconds (at most 15 minutes) for a plugin to allow the pod."""

    status: Status = SUCCESS
    timeout: float = 0.0


class PermitPlugin(Plugin[ArgsT]):
    @abc.abstractmethod
    def permit(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> PermitResult:
        """After Reserve: let the pod be bound, reject it, or make it wait (``Code.WAIT``)."""


#: why a write went nowhere when the fence refused it
_FENCED = "not sent: this replica is not the leader (its term ended or may have ended)"


@dataclass(frozen=True, slots=True)
class ApiResponse:
    """What an ``ApiClient`` request returns, whoever answered: the operator's ``Api`` (``edge/client.py``) or
    simulate's in-memory API server (``sim/apiserver.py``). The HTTP status and the decoded body (a dict for
    an object or a Status, text, or None), and the one status rule: ``ok`` is 2xx, ``gone`` 404, ``conflict``
    409, ``unauthorized`` 401.

    ``status`` 0 means no answer: `error` says why (a transport failure, a timeout), or `fenced` is set (a
    write this replica may not send).
    """

    status: int
    body: Any = None
    error: str = ""
    fenced: bool = False
    #: the request was sent more than once (``Api.request``'s retries): a 404 or 409 may answer our own first try
    retried: bool = False

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def gone(self) -> bool:
        """404: the object (or the API) does not exist."""
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """409: already exists, modified meanwhile, a failed uid precondition, or already bound."""
        return self.status == 409

    @property
    def unauthorized(self) -> bool:
        """401: the credentials were refused (a token that expired: refresh it and ask once more)."""
        return self.status == 401

    def detail(self, limit: int = 300) -> str:
        """For logs and messages: the Status message of an error, or the text, or why nothing came."""
        if self.status == 0:
            return self.error or (_FENCED if self.fenced else "no answer")
        body = self.body
        text = str(body.get("message", body)) if isinstance(body, dict) else str(body)
        return text[:limit]

    def describe(self) -> str:
        """``HTTP 409 <message>``, for log lines."""
        return f"HTTP {self.status} {self.detail()}" if self.status else self.detail()


class ApiClient(Protocol):
    """What the binding cycle hands to PreBind and Bind plugins: JSON requests to the API server.

    The operator passes its ``Api`` (``kopf_scheduler.edge.client``: credentials, keep-alive pool,
    and the fence that keeps a replica that lost its Lease from writing); ``simulate`` an in-memory
    API server holding the simulated pods, nodes and ResourceClaims. Never raises for HTTP errors: look at the
    ``ApiResponse``. `decode` False leaves a successful answer's body unparsed (a write whose answer
    nobody reads).
    """

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        decode: bool = True,
    ) -> ApiResponse: ...


class PreBindPlugin(Plugin[ArgsT]):
    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status:
        """Upstream ``PreBindPreFlight``: will ``pre_bind`` have work for `pod` on `node_name`? Called once
        Permit has been passed (or is waited at), before the binding cycle; pure and quick (no API calls).

        SUCCESS: it will (the pod's ``nominatedNodeName`` is set to the node before binding, as upstream
        does, so that other components see where the pod goes); SKIP: nothing to do, ``pre_bind`` is not
        called; ERROR: the binding cycle fails (the pod backs off). Any other code counts as an ERROR.
        The default says SUCCESS: a plugin that does not tell is assumed to have work."""
        return SUCCESS

    @abc.abstractmethod
    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str, client: ApiClient) -> Status:
        """The pod is allowed on `node_name` and about to be bound: prepare what it needs there
        (upstream PreBind: volumes, claims). SUCCESS or SKIP go on; anything else fails the binding
        cycle (every ``unreserve`` runs, the pod is forgotten and backs off)."""


class BindPlugin(Plugin[ArgsT]):
    @abc.abstractmethod
    async def bind(self, state: CycleState, pod: Pod, node_name: str, client: ApiClient) -> Status:
        """Bind the pod: SKIP hands it to the next Bind plugin (DefaultBinder, last, POSTs
        pods/binding); SUCCESS means bound; anything else fails the bind."""


@dataclass(frozen=True, slots=True)
class SignFragment:
    """One part of a pod's signature (upstream ``fwk.SignFragment``): a key naming what it is (upstream's
    signer names, e.g. ``v1.Pod.Spec.Tolerations``) and a value compared for equality (the pod's own frozen
    parts, tuples, strings...). Plugins that read the same part of the pod use the same key and value."""

    key: str
    value: object


class SignPlugin(Plugin[ArgsT]):
    """Upstream ``SignPlugin``: the parts of a pod this plugin's PreFilter, Filter, PreScore and Score
    depend on. Every such plugin of a profile must be one for the profile to sign pods."""

    @abc.abstractmethod
    def sign_pod(self, pod: Pod, snapshot: Snapshot) -> Sequence[SignFragment] | Status:
        """The fragments (possibly none: the plugin depends on nothing of the pod but its node), or a
        Status saying why the pod cannot be signed (then it is never batched). `snapshot` is the cycle's
        view of the cluster (as upstream's plugins read their handle's listers, e.g. which DeviceClasses
        serve an extended resource). Pure and cheap."""


class QueueSortPlugin(Plugin[ArgsT]):
    """Orders the active queue (upstream ``QueueSortPlugin``; plugins/queuesort/priority_sort.go is the default).

    One per profile: a policy names it in ``spec.queueSort`` (default PrioritySort: higher priority first,
    then the earlier enqueue time). ``less`` compares two queued pods, as upstream's ``Less`` compares
    ``QueuedPodInfo``s, so an order may use the enqueue ``timestamp``, ``attempts`` or ``added_at`` besides
    the pod. Pods equal both ways pop in the order they were queued. It must be a strict weak order and
    cheap: the queue calls it O(log n) times per push and pop.
    """

    @abc.abstractmethod
    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Whether `a` should be tried before `b`."""


def default_normalize(scores: npt.NDArray[np.int64], *, reverse: bool = False) -> npt.NDArray[np.int64]:
    """Upstream ``helper.DefaultNormalizeScore``: scale to 0..100 by the maximum; optionally reversed.

    All-zero scores stay 0, or become 100 each when reversed.
    """
    import numpy as np

    if scores.size == 0:
        return scores
    top = int(scores.max())
    if top == 0:
        if reverse:
            scores[:] = MAX_NODE_SCORE
        return scores
    out = (scores * MAX_NODE_SCORE) // top
    if reverse:
        out = MAX_NODE_SCORE - out
    return np.asarray(out, dtype=np.int64)


# --------------------------------------------------------------------------- requeueing: cluster events and hints


class ClusterEvent(enum.StrEnum):
    """A change in the cluster after which a pod some plugin rejected may fit (upstream ``fwk.ClusterEvent``,
    framework/events.go), as ``core/scheduling/routing.py`` raises it. The values label
    ``scheduler_queue_incoming_pods``.

    A hint registered for an event is called as ``hint(pod, old, new)`` with the objects before and after
    (None for one that is not there):

    - ``NODE_ADD`` (None, Node), ``NODE_UPDATE`` (Node, Node): any change of the Node object.
    - ``ASSIGNED_POD_ADD`` (None, Pod): a pod bound, by us or anyone. ``ASSIGNED_POD_UPDATE`` (Pod, Pod): a
      bound pod's labels changed. ``ASSIGNED_POD_SCALE_DOWN`` (Pod, Pod): some request of a bound pod went
      down (an in-place resize). ``ASSIGNED_POD_DELETE`` (Pod, None): a bound pod deleted or finished, or an
      assumption dropped (its pod deleted, or never confirmed), so its room on its node is free again.
    - ``<Kind>_CHANGE``: the stored object (``core/model/objects.py``'s type of that kind) before and after;
      ``NAMESPACE_CHANGE``: the namespace's labels before and after (only a change of labels is raised).

    An event that carries no object (room released by several pods at once: a rejected gang's
    reservations) asks no hint: every plugin registered for it answers QUEUE.
    """

    NODE_ADD = "NodeAdd"
    NODE_UPDATE = "NodeUpdate"
    ASSIGNED_POD_ADD = "AssignedPodAdd"
    ASSIGNED_POD_UPDATE = "AssignedPodUpdate"
    ASSIGNED_POD_SCALE_DOWN = "AssignedPodScaleDown"
    ASSIGNED_POD_DELETE = "AssignedPodDelete"
    NAMESPACE_CHANGE = "NamespaceChange"
    SERVICE_CHANGE = "ServiceChange"
    REPLICATION_CONTROLLER_CHANGE = "ReplicationControllerChange"
    REPLICA_SET_CHANGE = "ReplicaSetChange"
    STATEFUL_SET_CHANGE = "StatefulSetChange"
    PERSISTENT_VOLUME_CHANGE = "PersistentVolumeChange"
    PERSISTENT_VOLUME_CLAIM_CHANGE = "PersistentVolumeClaimChange"
    STORAGE_CLASS_CHANGE = "StorageClassChange"
    POD_DISRUPTION_BUDGET_CHANGE = "PodDisruptionBudgetChange"
    CSI_NODE_CHANGE = "CSINodeChange"
    CSI_DRIVER_CHANGE = "CSIDriverChange"
    CSI_STORAGE_CAPACITY_CHANGE = "CSIStorageCapacityChange"
    #: a ``scheduling.k8s.io`` PodGroup (the Workload API)
    POD_GROUP_CHANGE = "PodGroupChange"
    #: a ``scheduling.x-k8s.io`` PodGroup (scheduler-plugins' coscheduling)
    COSCHEDULING_POD_GROUP_CHANGE = "PodGroup.scheduling.x-k8s.ioChange"
    #: ``resource.k8s.io`` objects (DynamicResources): the core/dra/objects.py types
    RESOURCE_CLAIM_CHANGE = "ResourceClaimChange"
    RESOURCE_SLICE_CHANGE = "ResourceSliceChange"
    DEVICE_CLASS_CHANGE = "DeviceClassChange"


class QueueingHint(enum.Enum):
    """A hint's answer (upstream ``fwk.QueueingHint``): QUEUE moves the pod out of the unschedulable pool
    (to the active queue, or to backoff while its backoff runs), QUEUE_SKIP leaves it there."""

    QUEUE_SKIP = 0
    QUEUE = 1


#: ``hint(pod, old, new)``: may the event that changed ``old`` into ``new`` make ``pod`` (rejected by the
#: plugin in its last attempt) schedulable? See ``ClusterEvent`` for the objects.
QueueingHintFn = Callable[["Pod", Any, Any], QueueingHint]


@dataclass(frozen=True, slots=True)
class ClusterEventWithHint:
    """An event a plugin registers for, with an optional hint (None: every such event answers QUEUE)."""

    event: ClusterEvent
    hint: QueueingHintFn | None = None


class EnqueueHandle(Protocol):
    """What a plugin's hints may read of the cluster (upstream plugins reach it through ``fwk.Handle``):
    the scheduler's cache as it is when the hint runs."""

    @property
    def objects(self) -> ClusterObjects:
        """Services, controllers, volumes, PodGroups, namespace labels... as the cache holds them now."""

    def get_node_info(self, name: str) -> NodeInfo | None:
        """The node called `name` with the pods on it (its ``node`` is None for a node already deleted)."""


class EnqueueExtensions(Plugin[ArgsT]):
    """Upstream ``EnqueueExtensions`` (framework/interface.go ``EventsToRegister``): the cluster events after
    which a pod this plugin rejected may fit, each with an optional hint that looks closer.

    The queue (``core/state/queueing.py``, upstream ``isPodWorthRequeuing``) moves a pod of the unschedulable pool
    when one of the plugins that rejected it in its last attempt registered the event and its hint says
    QUEUE (no hint, or a hint that raised, counts as QUEUE, as upstream treats an error). A rejecting
    plugin that does not subclass this gets every event (upstream's ``defaultEnqueueExtension``), and so
    does a pod with no rejecting plugin on record; an empty declaration means no cluster event can help.
    Whatever the hints say, a pod leaves the pool after ``pod_max_in_unschedulable`` (5 minutes), or when
    its own spec changes. Only plugins that can reject a pod are asked (PreFilter, Filter, Reserve, Permit).

    ``events_to_register`` runs once per profile when its queue is set up; hints run on every matching
    event for every pod the plugin rejected, so they must be cheap and pure.
    """

    @abc.abstractmethod
    def events_to_register(self, handle: EnqueueHandle) -> Sequence[ClusterEventWithHint]:
        """The events and hints (``handle``: what the hints may read of the cluster)."""


class PreEnqueuePlugin(Plugin[ArgsT]):
    """Upstream ``PreEnqueuePlugin``: may a pod enter the active queue? A pod one of them refuses waits
    gated (never popped, never reported), on record as rejected by that plugin, until one of the events
    the plugin registers (``EnqueueExtensions``, or a gang gaining a member) moves it and every PreEnqueue
    plugin then passes it; every move asks again (``core/state/queueing.py``). Called on every add and move of
    every pod: it must be cheap for pods it does not concern."""

    @abc.abstractmethod
    def pre_enqueue(self, pod: Pod, handle: EnqueueHandle) -> Status:
        """SUCCESS, or why the pod must wait (``handle``: what the plugin may read of the cluster)."""
