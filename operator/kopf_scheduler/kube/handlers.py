"""Kopf handlers (pending pods, SchedulingPolicies, the loop daemons, login) and the informers' feeds.

**Pods reach the queue through Kopf**: ``on_pod_event`` is an ``@kopf.on.event`` handler on pods,
and Kopf watches only unassigned pods (``settings.watching.field_selectors``: ``spec.nodeName=``,
sent to the API server, so bound pods of every scheduler never reach Kopf's per-event machinery).
It converts the body and lets ``core.scheduling.routing.route_unassigned_pod`` file it: a pod whose
``schedulerName`` is served is queued; any other waits in the pending index until a policy serves
its name (so a policy created later is served without a restart). The handler writes nothing onto
the pod and returns None: only ``on.event`` handlers leave no diff-base annotation, progress
annotation or finalizer on the objects they watch. Kopf's relist after a 410 does not report pods
deleted meanwhile, so ``reconcile_pending`` lists the unassigned pods' metadata every
``RECONCILE_PERIOD`` seconds and drops the ones that are gone (client-go's Replace), and a write
answered 404 drops its pod at once.

**Everything else the cache holds comes from informers** (``edge/informer.py``): assigned pods of
every scheduler (``spec.nodeName!=``, not terminal, as upstream's informer filters them), nodes,
namespaces and the other kinds the plugins read; ``feeds(app)`` says, per kind, where it is listed
and what each event does. Kopf's machinery costs several times what our informer does per event
(README, "Architecture"), and these kinds carry most events of a busy cluster. A watch that ends is
resumed from its resourceVersion and pauses nothing; only pods and nodes relisting after lost history
(a 410) pause the loops until that list is in (``App.current``).

Each function converts the body (``convert``), lets the core apply it (``core.scheduling.routing``) and
performs what comes back (``App.perform``: wake loops). A body the core cannot parse is logged,
gets a Warning event when it is a pending pod of ours, and is skipped.

``register(registry)`` adds the handlers to a Kopf registry (the CLI builds its own; the ``kopf run
-m kopf_scheduler.kube.main`` entry uses the default one); nothing registers at import. The login
handler hands Kopf the process's one ``Credentials`` (``edge/credentials.py``), so the pod and
policy watches log in exactly as the informers, the writes and the Lease do.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Mapping
from typing import Any, Final

import kopf

from ..core.model import paths
from ..core.model.objects import Pod
from ..core.scheduling import routing
from ..core.scheduling.dra_routing import route_dra_object, route_dra_relisted
from ..edge.client import WATCH_IDLE_TIMEOUT, Api
from ..edge.credentials import load_credentials
from ..edge.informer import Feed, Informer
from ..edge.plugins import installed_registry
from . import convert, events, loop
from .app import POLICY_GROUP, POLICY_PLURAL, POLICY_VERSION, App, prepare_collector_for_lists
from .leader import default_identity
from .login import connection_info, user_agent

__all__ = [
    "ASSIGNED_PODS",
    "OPTIONAL",
    "RECONCILE_PERIOD",
    "UNASSIGNED_PODS",
    "WATCHED",
    "configure",
    "feeds",
    "on_pod_event",
    "reconcile_pending",
    "register",
    "register_lifecycle",
]

logger = logging.getLogger(__name__)

#: what Kopf watches of pods: the unassigned ones, of every scheduler name
UNASSIGNED_PODS: Final = "spec.nodeName="
#: what the pod informer watches: bound and not terminal (upstream's assigned-pod informer)
ASSIGNED_PODS: Final = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
#: seconds between two reconciliations of the pending pods with a list of the unassigned ones
RECONCILE_PERIOD: Final = 60.0

#: (API path, kind) of everything the predicates and priorities read besides pods, nodes and namespaces
WATCHED: Final = (
    (paths.collection("v1", "services"), "Service"),
    (paths.collection("v1", "replicationcontrollers"), "ReplicationController"),
    (paths.collection("apps/v1", "replicasets"), "ReplicaSet"),
    (paths.collection("apps/v1", "statefulsets"), "StatefulSet"),
    (paths.collection("v1", "persistentvolumes"), "PersistentVolume"),
    (paths.collection("v1", "persistentvolumeclaims"), "PersistentVolumeClaim"),
    (paths.collection("storage.k8s.io/v1", "storageclasses"), "StorageClass"),
    (paths.collection("policy/v1", "poddisruptionbudgets"), "PodDisruptionBudget"),
    (paths.collection("storage.k8s.io/v1", "csinodes"), "CSINode"),
    (paths.collection("storage.k8s.io/v1", "csidrivers"), "CSIDriver"),
    (paths.collection("storage.k8s.io/v1", "csistoragecapacities"), "CSIStorageCapacity"),
)

#: (API path, kind) of the gangs' PodGroups (core/toolkit/gangs.py): either API may be absent (the
#: GenericWorkload feature off, the optional CRD not installed); an absent one counts as empty
OPTIONAL: Final = (
    (paths.collection("scheduling.k8s.io/v1beta1", "podgroups"), routing.KIND_POD_GROUP),
    (paths.collection("scheduling.x-k8s.io/v1alpha1", "podgroups"), routing.KIND_COSCHEDULING_POD_GROUP),
)

#: (API path, kind) of the ``resource.k8s.io/v1`` objects DynamicResources reads (core/scheduling/dra_routing.py);
#: optional: a cluster that does not serve the API has none of them
DRA_WATCHED: Final = (
    (paths.collection("resource.k8s.io/v1", "resourceclaims"), "ResourceClaim"),
    (paths.collection("resource.k8s.io/v1", "deviceclasses"), "DeviceClass"),
    (paths.collection("resource.k8s.io/v1", "resourceslices"), "ResourceSlice"),
    (paths.collection("resource.k8s.io/v1", "devicetaintrules"), "DeviceTaintRule"),  # DRADeviceTaintRules, GA in v1.37
)


def _app(memo: Any) -> App:
    app = memo.get("app") if isinstance(memo, Mapping) else getattr(memo, "app", None)
    if not isinstance(app, App):
        raise kopf.PermanentError("the operator memo holds no App (startup did not run)")
    return app


# --------------------------------------------------------------------------- pending pods (Kopf)


async def on_pod_event(event: Mapping[str, Any], memo: Any, **_: Any) -> None:
    """An unassigned pod was listed, added, changed or deleted (or bound: it left Kopf's selector)."""
    app = _app(memo)
    body = event.get("object")
    if not isinstance(body, Mapping):
        return
    gone = event.get("type") == "DELETED"
    if app.recorder is not None:
        app.recorder.pod(str(event.get("type") or "ADDED"), body)
    pod = _known_version(app, body) if gone else None
    if pod is None:
        try:
            pod = convert.pod(body)
        except convert.ObjectError as exc:
            _unreadable_pod(app, body, str(exc))
            return
    app.perform(
        routing.route_unassigned_pod(
            pod, gone=gone, cache=app.cache, pending=app.pending, served=app.states, now=app.now()
        )
    )


def _known_version(app: App, body: Mapping[str, Any]) -> Pod | None:
    """The parsed pod a DELETED body repeats, so that it is not parsed again: the pending index's copy
    (the pod left the selector unchanged: deleted), or the cache's when it holds this very version
    (bound: the assigned-pod informer usually confirms the bind before Kopf's DELETED arrives)."""
    scheduler_name, uid = convert.pod_identity(body)
    pod = app.pending.get(scheduler_name, uid)
    if pod is not None:
        return pod
    cached = app.cache.get_pod(uid)
    if cached is not None and cached.resource_version and cached.resource_version == convert.resource_version(body):
        return cached
    return None


async def reconcile_pending(app: App, *, period: float = RECONCILE_PERIOD) -> None:
    """Forever: list the unassigned pods' metadata and drop the pending pods the list lacks."""
    while True:
        await asyncio.sleep(period)
        known = [p.uid for p in app.pending]
        if not known:
            continue
        listed = await _unassigned_uids(app)
        if listed is not None:
            app.perform(
                routing.route_pending_reconciled(
                    listed, known, cache=app.cache, pending=app.pending, served=app.states, now=app.now()
                )
            )


async def _unassigned_uids(app: App) -> set[str] | None:
    uids: set[str] = set()
    failed = await app.api.list_each(
        paths.collection("v1", "pods"),
        lambda item: uids.add(convert.pod_uid(item)),
        query=f"&fieldSelector={UNASSIGNED_PODS}",
        accept=METADATA_LIST,
    )
    if failed is not None:
        logger.debug("cannot list the unassigned pods: %s", failed.describe())
        return None
    return uids


#: the metadata-only form of a list (PartialObjectMetadataList): the uids are all a reconciliation reads
METADATA_LIST: Final = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


# --------------------------------------------------------------------------- the informers' kinds


def feeds(app: App) -> list[Feed]:
    """Every kind the informers watch, and what its events do to `app`."""

    def pods(kind: str, body: Mapping[str, Any]) -> None:
        if app.recorder is not None:
            app.recorder.pod(kind, body)
        assumed = app.cache.get_pod(convert.pod_uid(body)) if kind != "DELETED" else None
        pod = convert.bound_pod(body, assumed) if assumed is not None and app.cache.is_assumed(assumed) else None
        if pod is None:  # not our own bind seen (that reuses the assumed pod), or more changed than the bind
            try:
                pod = convert.pod(body)
            except convert.ObjectError as exc:
                logger.warning("skipping bound pod %s: %s", convert.pod_uid(body), exc)
                return
        app.perform(
            routing.route_assigned_pod(
                pod, deleted=kind == "DELETED", cache=app.cache, pending=app.pending, served=app.states, now=app.now()
            )
        )

    def pods_relisted(uids: set[str]) -> None:
        app.perform(
            routing.route_assigned_pods_relisted(
                uids, cache=app.cache, pending=app.pending, served=app.states, now=app.now()
            )
        )

    def nodes(kind: str, body: Mapping[str, Any]) -> None:
        if app.recorder is not None:
            app.recorder.node(kind, body)
        if kind == "DELETED":
            app.perform(routing.route_node_deleted(convert.name_of(body), cache=app.cache))
            return
        try:
            node = convert.node(body)
        except convert.ObjectError as exc:
            logger.warning("skipping node %s: %s", convert.name_of(body), exc)
            return
        app.perform(routing.route_node(node, cache=app.cache, served=app.states, now=app.now()))

    def nodes_relisted(names: set[str]) -> None:
        app.perform(routing.route_nodes_relisted(names, cache=app.cache))

    def namespaces(kind: str, body: Mapping[str, Any]) -> None:
        name, labels = convert.namespace_labels(body)
        deleted = kind == "DELETED"
        app.perform(
            routing.route_namespace(
                name, None if deleted else labels, cache=app.cache, served=app.states, now=app.now()
            )
        )

    def namespaces_relisted(names: set[str]) -> None:
        app.perform(routing.route_namespaces_relisted(names, cache=app.cache, served=app.states, now=app.now()))

    out = [
        Feed(
            "Pod",
            paths.collection("v1", "pods"),
            pods,
            convert.pod_uid,
            pods_relisted,
            field_selector=ASSIGNED_PODS,
            pauses=True,
        ),
        Feed("Node", paths.collection("v1", "nodes"), nodes, convert.name_of, nodes_relisted, pauses=True),
        Feed("Namespace", paths.collection("v1", "namespaces"), namespaces, convert.name_of, namespaces_relisted),
    ]
    out += [_object_feed(app, path, kind) for path, kind in WATCHED]
    out += [_dra_feed(app, path, kind) for path, kind in DRA_WATCHED]
    return out + [_object_feed(app, path, kind, optional=True) for path, kind in OPTIONAL]


def _dra_feed(app: App, path: str, kind: str) -> Feed:
    def key(body: Mapping[str, Any]) -> str:
        return convert.dra_key(kind, body)

    def apply(event: str, body: Mapping[str, Any]) -> None:
        obj = None
        if event != "DELETED":
            try:
                obj = convert.parse_dra(kind, body)
            except convert.ObjectError as exc:
                logger.warning("skipping %s %s: %s", kind, key(body), exc)
                return
        app.perform(route_dra_object(kind, key(body), obj, cache=app.cache, served=app.states, now=app.now()))

    def relisted(keys: set[str]) -> None:
        app.perform(route_dra_relisted(kind, keys, cache=app.cache, served=app.states, now=app.now()))

    return Feed(kind, path, apply, key, relisted, optional=True)


def _object_feed(app: App, path: str, kind: str, *, optional: bool = False) -> Feed:
    def key(body: Mapping[str, Any]) -> str:
        return convert.object_key(kind, body)

    def apply(event: str, body: Mapping[str, Any]) -> None:
        obj = None
        if event != "DELETED":
            try:
                obj = convert.parse_other(kind, body)
            except convert.ObjectError as exc:
                logger.warning("skipping %s %s: %s", kind, key(body), exc)
                return
        app.perform(routing.route_object(kind, key(body), obj, cache=app.cache, served=app.states, now=app.now()))

    def relisted(keys: set[str]) -> None:
        app.perform(routing.route_objects_relisted(kind, keys, cache=app.cache, served=app.states, now=app.now()))

    return Feed(kind, path, apply, key, relisted, optional=optional)


def _unreadable_pod(app: App, body: Mapping[str, Any], problem: str) -> None:
    ref = convert.pod_ref(body)
    logger.warning("skipping pod %s/%s: %s", ref.namespace, ref.name, problem)
    if (
        routing.reports_unreadable(ref.scheduler_name, ref.node_name, app.states)
        and app.leading.is_set()
        and ref.name
        and ref.uid
    ):
        message = f"cannot read the pod: {problem}"
        app.spawn(events.failed_scheduling(app, namespace=ref.namespace, name=ref.name, uid=ref.uid, message=message))


def start_informers(app: App) -> None:
    """List and watch every fed kind in the background, with the watchdog and the pending pods'
    reconciliation; the App counts the kinds that are synced."""
    watched = feeds(app)
    app.sync = routing.CacheSync(f.kind for f in watched)
    prepare_collector_for_lists()
    app.informers = [
        Informer(app.api, feed, on_sync=app.kind_synced, on_restart=app.informer_restarted) for feed in watched
    ]
    tasks = [app.spawn(informer.run()) for informer in app.informers]
    tasks += [app.spawn(app.watchdog()), app.spawn(reconcile_pending(app))]

    async def stop() -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    app.on_shutdown.insert(0, stop)


# --------------------------------------------------------------------------- SchedulingPolicy


async def _write_statuses(app: App, statuses: Mapping[str, Mapping[str, Any]]) -> None:
    for name, status in statuses.items():
        await app.write_policy_status(name, status)


async def on_policy(body: Mapping[str, Any], memo: Any, **_: Any) -> None:
    """Create, update and resume: validate, accept or reject (keeping the last good profile)."""
    app = _app(memo)
    await _write_statuses(app, app.observe_policy(convert.policy_meta(body)))


async def on_policy_delete(body: Mapping[str, Any], memo: Any, **_: Any) -> None:
    """Stop serving its schedulerName (pods stay Pending), or hand the name to the next claimant."""
    app = _app(memo)
    await _write_statuses(app, app.delete_policy(convert.policy_meta(body).name))


async def policy_daemon(body: Mapping[str, Any], memo: Any, stopped: Any, **_: Any) -> None:
    app = _app(memo)
    name = convert.policy_meta(body).name
    if name not in app.policies.records:  # the daemon may start before the resume handler ran
        await _write_statuses(app, app.observe_policy(convert.policy_meta(body)))
    await loop.run(app, name, stopped)


# --------------------------------------------------------------------------- operator lifecycle

PREFIX: Final = "scheduling.kopf.dev"


class _PolicyDiffBase(kopf.AnnotationsDiffBaseStorage):
    """Diff-base essences for SchedulingPolicies only. Kopf builds one (a deep copy of the body)
    for every event of every object before it looks at the handlers; pods have only an
    ``on.event`` handler, which never reads it, so a pod's essence is empty."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        if body.get("kind") == "Pod":
            return kopf.BodyEssence()
        return super().build(body=body, extra_fields=extra_fields)

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None if body.get("kind") == "Pod" else super().fetch(body=body)


def configure(
    settings: kopf.OperatorSettings, *, shard: str = "", watch_idle_timeout: float = WATCH_IDLE_TIMEOUT
) -> None:
    """Settings of Kopf, which serves the unassigned pods and the SchedulingPolicies:
    - pods: only unassigned ones, selected by the API server; an empty diff-base essence; the
      per-object loggers (``kopf.objects``) at WARNING, since their debug lines are built per event;
    - posting of Kopf's own k8s events off (our events are written by kube/events.py);
    - progress and diff-base storage in annotations of the SchedulingPolicies;
    - our own finalizer name on SchedulingPolicies (daemons need one to stop before deletion),
      one per ``--policy`` shard: Kopf removes its finalizer from every object none of its
      handlers match, so shards sharing one name would strip each other's in a loop;
    - watches end on the server after 5 minutes and are given up when nothing, not even a
      bookmark, came for `watch_idle_timeout` seconds (the same deadline as our informers').
    """
    settings.watching.field_selectors[POD_SELECTOR] = UNASSIGNED_PODS
    settings.watching.chunk_size = 500
    settings.posting.enabled = False
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = _PolicyDiffBase(prefix=PREFIX, key="last-handled-configuration")
    settings.persistence.finalizer = f"{PREFIX}/{shard_name(shard)}"
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.inactivity_timeout = watch_idle_timeout
    settings.watching.connect_timeout = 10
    settings.networking.request_timeout = 30
    settings.execution.max_workers = 4  # every handler (the login too) is async: the pool stays idle
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)


#: Kopf's selector of core v1 pods (not metrics.k8s.io's PodMetrics, also named pods)
POD_SELECTOR: Final = ("v1", "pods")


def shard_name(shard: str) -> str:
    """``kopf-scheduler`` or ``kopf-scheduler-<shard>``, within the 63 characters of a name part."""
    name = f"kopf-scheduler-{shard}" if shard else "kopf-scheduler"
    if len(name) > 63:
        name = "kopf-scheduler-" + hashlib.sha1(shard.encode()).hexdigest()[:16]
    return name


async def startup(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    if not settings.persistence.finalizer.startswith(PREFIX):  # not configured by the CLI: `kopf run`
        configure(settings)
    app = memo.get("app") if hasattr(memo, "get") else None
    if not isinstance(app, App):
        identity = default_identity()
        memo["app"] = app = App(Api(load_credentials(), user_agent=user_agent(identity)), identity=identity)
    start(app)


def start(app: App) -> None:
    """Start what the App runs beside Kopf (informers, watchdog, reconciliation, the Scheduled-event
    recovery of a process that leads from the start), once: a Kopf restarted in the same process by
    ``kube/supervision.py`` runs its startup again and finds them running."""
    if app.started:
        return
    app.started = True
    start_informers(app)
    if app.leading.is_set():  # no leader election: lead from the start
        app.spawn(events.recover_scheduled(app))
    credentials = app.api.credentials
    logger.info(
        "kopf-scheduler %s started; API server %s, credentials from %s",
        app.identity,
        credentials.server,
        credentials.source,
    )
    plugins = installed_registry()
    for name in plugins.out_of_tree():
        logger.info("out-of-tree plugin %s from %s", name, plugins.origins[name])
    for name, problem in plugins.problems.items():
        logger.error("out-of-tree plugin %s cannot be used: %s", name, problem)


async def cleanup(memo: Any, **_: Any) -> None:
    app = memo.get("app") if hasattr(memo, "get") else None
    if isinstance(app, App) and not app.supervised:  # a supervised App outlives Kopf: its supervisor stops it
        app.leading.clear()
        for hook in app.on_shutdown:
            await hook()
        await app.api.close()


async def login(memo: Any, **_: Any) -> kopf.ConnectionInfo:
    """The App's credentials (startup runs first), with a fresh token: Kopf calls this again after
    a 401 and when the token's expiration (an exec plugin's) has passed."""
    credentials = _app(memo).api.credentials
    if credentials.token is not None and credentials.token.stale():
        await asyncio.to_thread(credentials.token.refresh)
    return connection_info(credentials)


def register_lifecycle(registry: kopf.OperatorRegistry) -> None:
    """Startup (settings, the App unless the caller put one in the memo), cleanup, login."""
    kopf.on.startup(registry=registry, id="kopf-scheduler-startup")(startup)
    kopf.on.cleanup(registry=registry, id="kopf-scheduler-cleanup")(cleanup)
    kopf.on.login(registry=registry, id="kopf-scheduler-login")(login)


# --------------------------------------------------------------------------- registration


def register(registry: kopf.OperatorRegistry, *, policies: frozenset[str] | None = None) -> None:
    """Register the lifecycle, pod, policy and daemon handlers; `policies` limits the shard to those names."""
    register_lifecycle(registry)
    kopf.on.event(*POD_SELECTOR, registry=registry, id="pending-pods")(on_pod_event)

    def ours(name: str, **_: Any) -> bool:
        return policies is None or name in policies

    gvp = (POLICY_GROUP, POLICY_VERSION, POLICY_PLURAL)
    kopf.on.create(*gvp, registry=registry, id="policy", when=ours)(on_policy)
    kopf.on.update(*gvp, registry=registry, id="policy", when=ours)(on_policy)
    kopf.on.resume(*gvp, registry=registry, id="policy", when=ours)(on_policy)
    kopf.on.delete(*gvp, registry=registry, id="policy-delete", optional=True, when=ours)(on_policy_delete)
    kopf.daemon(*gvp, registry=registry, id="loop", cancellation_timeout=5.0, when=ours)(policy_daemon)
