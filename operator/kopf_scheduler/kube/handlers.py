"""Watch events into the core (fed by the informers); SchedulingPolicy lifecycle; the loop daemon; login.

Pods, nodes, namespaces and the other kinds the plugins read come from our own informers
(``kube/informer.py``, started by the startup handler): ``feeds(app)`` says, per kind, where it
is listed and what each event does. Each function converts the body (``convert``), lets the core
apply it (``core.routing``) and performs what comes back (``App.perform``: wake loops); all are
O(1) apart from the moves of unschedulable pods that upstream does too. A body the core cannot
parse is logged, gets a Warning event when it is a pending pod of ours, and is skipped.

Kopf serves the SchedulingPolicies: ``register(registry)`` adds their handlers and the loop
daemon to a Kopf registry (the CLI builds its own; the ``kopf run -m kopf_scheduler.kube.main``
entry uses the default one), and the operator lifecycle (startup: the App and its informers;
cleanup; login). Nothing registers at import.

The login handler hands Kopf the process's one ``Credentials`` (``kube/credentials.py``), so the
policy watch logs in exactly as the informers, the writes and the Lease do.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Mapping
from typing import Any, Final

import kopf

from ..core import routing
from ..entry_points import installed_registry
from . import convert, events, loop
from .app import POLICY_GROUP, POLICY_PLURAL, POLICY_VERSION, App
from .client import Api
from .credentials import connection_info, load_credentials
from .informer import Feed, Informer
from .leader import default_identity

__all__ = ["OPTIONAL", "WATCHED", "configure", "feeds", "register", "register_lifecycle"]

logger = logging.getLogger(__name__)

#: (API path, kind) of everything the predicates and priorities read besides pods, nodes and namespaces
WATCHED: Final = (
    ("/api/v1/services", "Service"),
    ("/api/v1/replicationcontrollers", "ReplicationController"),
    ("/apis/apps/v1/replicasets", "ReplicaSet"),
    ("/apis/apps/v1/statefulsets", "StatefulSet"),
    ("/api/v1/persistentvolumes", "PersistentVolume"),
    ("/api/v1/persistentvolumeclaims", "PersistentVolumeClaim"),
    ("/apis/storage.k8s.io/v1/storageclasses", "StorageClass"),
    ("/apis/policy/v1/poddisruptionbudgets", "PodDisruptionBudget"),
    ("/apis/storage.k8s.io/v1/csinodes", "CSINode"),
)

#: (API path, kind) of the gangs' PodGroups (core/gangs.py): either API may be absent (the
#: GenericWorkload feature off, the optional CRD not installed); an absent one counts as empty
OPTIONAL: Final = (
    ("/apis/scheduling.k8s.io/v1beta1/podgroups", routing.KIND_POD_GROUP),
    ("/apis/scheduling.x-k8s.io/v1alpha1/podgroups", routing.KIND_COSCHEDULING_POD_GROUP),
)


def _app(memo: Any) -> App:
    app = memo.get("app") if isinstance(memo, Mapping) else getattr(memo, "app", None)
    if not isinstance(app, App):
        raise kopf.PermanentError("the operator memo holds no App (startup did not run)")
    return app


def feeds(app: App) -> list[Feed]:
    """Every kind the scheduler watches, and what its events do to `app`."""

    def pods(kind: str, body: Mapping[str, Any]) -> None:
        try:
            pod = convert.pod(body)
        except convert.ObjectError as exc:
            _unreadable_pod(app, body, str(exc))
            return
        app.perform(routing.route_pod(pod, deleted=kind == "DELETED", cache=app.cache, pending=app.pending, served=app.states, now=app.now()))

    def pods_relisted(uids: set[str]) -> None:
        app.perform(routing.route_pods_relisted(uids, cache=app.cache, pending=app.pending, served=app.states, now=app.now()))

    def nodes(kind: str, body: Mapping[str, Any]) -> None:
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
        app.perform(routing.route_namespace(name, None if deleted else labels, cache=app.cache, served=app.states, now=app.now()))

    def namespaces_relisted(names: set[str]) -> None:
        app.perform(routing.route_namespaces_relisted(names, cache=app.cache, served=app.states, now=app.now()))

    out = [
        Feed("Pod", "/api/v1/pods", pods, convert.pod_uid, pods_relisted),
        Feed("Node", "/api/v1/nodes", nodes, convert.name_of, nodes_relisted),
        Feed("Namespace", "/api/v1/namespaces", namespaces, convert.name_of, namespaces_relisted),
    ]
    out += [_object_feed(app, path, kind) for path, kind in WATCHED]
    return out + [_object_feed(app, path, kind, optional=True) for path, kind in OPTIONAL]


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
    if routing.reports_unreadable(ref.scheduler_name, ref.node_name, app.states) and app.leading.is_set() and ref.name and ref.uid:
        message = f"cannot read the pod: {problem}"
        app.spawn(events.failed_scheduling(app, namespace=ref.namespace, name=ref.name, uid=ref.uid, message=message))


def start_informers(app: App) -> None:
    """List and watch every fed kind in the background; the App counts the kinds that listed."""
    watched = feeds(app)
    app.sync = routing.CacheSync(f.kind for f in watched)
    tasks = [app.spawn(Informer(app.api, feed, listed=app.listed).run()) for feed in watched]

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


def configure(settings: kopf.OperatorSettings, *, shard: str = "") -> None:
    """Settings of Kopf, which serves only SchedulingPolicies (the informers watch the rest):
    - posting of Kopf's own k8s events off (our events are written by kube/events.py);
    - progress and diff-base storage in annotations of the SchedulingPolicies;
    - our own finalizer name on SchedulingPolicies (daemons need one to stop before deletion),
      one per ``--policy`` shard: Kopf removes its finalizer from every object none of its
      handlers match, so shards sharing one name would strip each other's in a loop;
    - watch requests with a server-side timeout, so a stuck connection is renewed.
    """
    settings.posting.enabled = False
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix=PREFIX, key="last-handled-configuration")
    settings.persistence.finalizer = f"{PREFIX}/{shard_name(shard)}"
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.networking.request_timeout = 30
    settings.execution.max_workers = 4  # every handler (the login too) is async: the pool stays idle


def shard_name(shard: str) -> str:
    """``kopf-scheduler`` or ``kopf-scheduler-<shard>``, within the 63 characters of a name part."""
    name = f"kopf-scheduler-{shard}" if shard else "kopf-scheduler"
    if len(name) > 63:
        name = "kopf-scheduler-" + hashlib.sha1(shard.encode()).hexdigest()[:16]
    return name


async def startup(settings: kopf.OperatorSettings, memo: Any, **_: Any) -> None:
    if not settings.persistence.finalizer.startswith(PREFIX):  # not configured by the CLI
        configure(settings)
    app = memo.get("app") if hasattr(memo, "get") else None
    if not isinstance(app, App):
        memo["app"] = app = App(Api(load_credentials()), identity=default_identity())
    app.started = True
    start_informers(app)
    credentials = app.api.credentials
    logger.info("kopf-scheduler %s started; API server %s, credentials from %s", app.identity, credentials.server, credentials.source)
    plugins = installed_registry()
    for name in plugins.out_of_tree():
        logger.info("out-of-tree plugin %s from %s", name, plugins.origins[name])
    for name, problem in plugins.problems.items():
        logger.error("out-of-tree plugin %s cannot be used: %s", name, problem)


async def cleanup(memo: Any, **_: Any) -> None:
    app = memo.get("app") if hasattr(memo, "get") else None
    if isinstance(app, App):
        app.leading.clear()
        for hook in app.on_shutdown:
            await hook()
        await app.api.close()


async def login(memo: Any, **_: Any) -> kopf.ConnectionInfo:
    """The App's credentials (startup runs first), with the token re-read: Kopf calls this again
    after a 401, which is when a rotated token file matters."""
    credentials = _app(memo).api.credentials
    if credentials.token is not None:
        credentials.token.refresh()
    return connection_info(credentials)


def register_lifecycle(registry: kopf.OperatorRegistry) -> None:
    """Startup (settings, the App unless the caller put one in the memo), cleanup, login."""
    kopf.on.startup(registry=registry, id="kopf-scheduler-startup")(startup)
    kopf.on.cleanup(registry=registry, id="kopf-scheduler-cleanup")(cleanup)
    kopf.on.login(registry=registry, id="kopf-scheduler-login")(login)



# --------------------------------------------------------------------------- registration


def register(registry: kopf.OperatorRegistry, *, policies: frozenset[str] | None = None) -> None:
    """Register the lifecycle, policy and daemon handlers; `policies` limits the shard to those names."""
    register_lifecycle(registry)

    def ours(name: str, **_: Any) -> bool:
        return policies is None or name in policies

    gvp = (POLICY_GROUP, POLICY_VERSION, POLICY_PLURAL)
    kopf.on.create(*gvp, registry=registry, id="policy", when=ours)(on_policy)
    kopf.on.update(*gvp, registry=registry, id="policy", when=ours)(on_policy)
    kopf.on.resume(*gvp, registry=registry, id="policy", when=ours)(on_policy)
    kopf.on.delete(*gvp, registry=registry, id="policy-delete", optional=True, when=ours)(on_policy_delete)
    kopf.daemon(*gvp, registry=registry, id="loop", cancellation_timeout=5.0, when=ours)(policy_daemon)
