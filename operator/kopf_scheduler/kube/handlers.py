"""Kopf handlers: watch events into the core; SchedulingPolicy lifecycle; the loop daemon; login.

``register(registry)`` adds every handler to a Kopf registry (the CLI builds its own; the
``kopf run -m kopf_scheduler.kube.main`` entry uses the default one). Nothing registers at import.

Watch handlers are ``@kopf.on.event``: they write nothing onto the watched objects. Each one
converts the body (``convert``), lets the core apply it (``core.routing``) and performs what
comes back (``App.perform``: wake loops). All are ``async def`` and O(1) apart from the moves of
unschedulable pods that upstream does too, so Kopf does not hop them through its thread pool. A
body the core cannot parse is logged, gets a Warning event when it is a pending pod of ours,
and is skipped.

The login handler hands Kopf the process's one ``Credentials`` (``kube/credentials.py``), so the
watches log in exactly as the writes and the Lease do.
"""

from __future__ import annotations

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
from .leader import default_identity

__all__ = ["WATCHED", "configure", "register", "register_lifecycle"]

logger = logging.getLogger(__name__)

#: (group, version, plural, kind) of everything the predicates and priorities read
WATCHED: Final = (
    ("", "v1", "services", "Service"),
    ("", "v1", "replicationcontrollers", "ReplicationController"),
    ("apps", "v1", "replicasets", "ReplicaSet"),
    ("apps", "v1", "statefulsets", "StatefulSet"),
    ("", "v1", "persistentvolumes", "PersistentVolume"),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    ("storage.k8s.io", "v1", "storageclasses", "StorageClass"),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    ("storage.k8s.io", "v1", "csinodes", "CSINode"),
    # gangs (core/gangs.py); either API may be absent (GenericWorkload off, the optional CRD not
    # installed): Kopf watches a resource only while the API server serves it
    ("scheduling.k8s.io", "v1beta1", "podgroups", routing.KIND_POD_GROUP),
    ("scheduling.x-k8s.io", "v1alpha1", "podgroups", routing.KIND_COSCHEDULING_POD_GROUP),
)


def _app(memo: Any) -> App:
    app = memo.get("app") if isinstance(memo, Mapping) else getattr(memo, "app", None)
    if not isinstance(app, App):
        raise kopf.PermanentError("the operator memo holds no App (startup did not run)")
    return app


# --------------------------------------------------------------------------- pods


async def on_pod_event(event: Mapping[str, Any], memo: Any, **_: Any) -> None:
    app = _app(memo)
    body = event.get("object")
    if not isinstance(body, Mapping):
        return
    try:
        pod = convert.pod(body)
    except convert.ObjectError as exc:
        _unreadable_pod(app, body, str(exc))
        return
    deleted = event.get("type") == "DELETED"
    app.perform(routing.route_pod(pod, deleted=deleted, cache=app.cache, pending=app.pending, served=app.states, now=app.now()))


def _unreadable_pod(app: App, body: Mapping[str, Any], problem: str) -> None:
    ref = convert.pod_ref(body)
    logger.warning("skipping pod %s/%s: %s", ref.namespace, ref.name, problem)
    if routing.reports_unreadable(ref.scheduler_name, ref.node_name, app.states) and app.leading.is_set() and ref.name and ref.uid:
        message = f"cannot read the pod: {problem}"
        app.spawn(events.failed_scheduling(app, namespace=ref.namespace, name=ref.name, uid=ref.uid, message=message))


# --------------------------------------------------------------------------- nodes and the rest


async def on_node_event(event: Mapping[str, Any], memo: Any, **_: Any) -> None:
    app = _app(memo)
    body = event.get("object")
    if not isinstance(body, Mapping):
        return
    if event.get("type") == "DELETED":
        app.perform(routing.route_node_deleted(convert.node_name(body), cache=app.cache))
        return
    try:
        node = convert.node(body)
    except convert.ObjectError as exc:
        logger.warning("skipping node %s: %s", convert.node_name(body), exc)
        return
    app.perform(routing.route_node(node, cache=app.cache, served=app.states, now=app.now()))


def _other_handler(kind: str) -> Any:
    async def on_object_event(event: Mapping[str, Any], memo: Any, **_: Any) -> None:
        app = _app(memo)
        body = event.get("object")
        if not isinstance(body, Mapping):
            return
        key = convert.object_key(kind, body)
        obj = None
        if event.get("type") != "DELETED":
            try:
                obj = convert.parse_other(kind, body)
            except convert.ObjectError as exc:
                logger.warning("skipping %s %s: %s", kind, key, exc)
                return
        app.perform(routing.route_object(kind, key, obj, cache=app.cache, served=app.states, now=app.now()))

    on_object_event.__name__ = on_object_event.__qualname__ = f"on_{kind.lower().replace('.', '_').replace('-', '_')}_event"
    return on_object_event


async def on_namespace_event(event: Mapping[str, Any], memo: Any, **_: Any) -> None:
    app = _app(memo)
    body = event.get("object")
    if not isinstance(body, Mapping):
        return
    name, labels = convert.namespace_labels(body)
    deleted = event.get("type") == "DELETED"
    app.perform(routing.route_namespace(name, None if deleted else labels, cache=app.cache, served=app.states, now=app.now()))


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
    """Settings, chosen so Kopf writes nothing onto pods and costs little per event:
    - posting of Kopf's own k8s events off (our events are written by kube/events.py);
    - progress and diff-base storage in annotations only (they land only on SchedulingPolicies:
      pods and nodes have only ``on.event`` handlers, which store nothing);
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
    """Register the watch, policy and daemon handlers; `policies` limits the shard to those names."""
    register_lifecycle(registry)

    def ours(name: str, **_: Any) -> bool:
        return policies is None or name in policies

    kopf.on.event("v1", "pods", registry=registry, id="pods")(on_pod_event)
    kopf.on.event("v1", "nodes", registry=registry, id="nodes")(on_node_event)
    kopf.on.event("v1", "namespaces", registry=registry, id="namespaces")(on_namespace_event)
    for group, version, plural, kind in WATCHED:
        fn = _other_handler(kind)
        if group:
            kopf.on.event(group, version, plural, registry=registry, id=f"{plural}.{group}" if plural == "podgroups" else plural)(fn)
        else:
            kopf.on.event(version, plural, registry=registry, id=plural)(fn)
    gvp = (POLICY_GROUP, POLICY_VERSION, POLICY_PLURAL)
    kopf.on.create(*gvp, registry=registry, id="policy", when=ours)(on_policy)
    kopf.on.update(*gvp, registry=registry, id="policy", when=ours)(on_policy)
    kopf.on.resume(*gvp, registry=registry, id="policy", when=ours)(on_policy)
    kopf.on.delete(*gvp, registry=registry, id="policy-delete", optional=True, when=ours)(on_policy_delete)
    kopf.daemon(*gvp, registry=registry, id="loop", cancellation_timeout=5.0, when=ours)(policy_daemon)
