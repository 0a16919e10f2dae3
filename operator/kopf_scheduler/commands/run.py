"""``kopf-scheduler run``: the production entry; runs Kopf programmatically with our own registry.

    kopf-scheduler run [--kubeconfig F] [--leader-elect] [--lease-namespace NS]
                       [--lease-duration 15 --renew-deadline 10 --retry-period 2]
                       [--policy NAME ...] [--verbose]
                       [--secure-port 10259] [--tls-cert-file F --tls-private-key-file F] [--client-ca-file F]
                       [--authorization-always-allow-paths /healthz,/readyz,/livez] [--insecure-port N]
                       [--record DIR [--record-segment-mb 32] [--record-segments 8]]

Kopf runs standalone (no Kopf peering) and cluster-wide, supervised (``kube/supervision.py``): when
its orchestration fails (a discovery answer cut short, a watch's error) it is started again in the
same process while the informers, the cache, the queues and the Lease carry on; the informers start
before Kopf does. SIGUSR2 logs what the scheduler believes:
every cached node with its requested resources and pods, and the queues (``core/state/dump.py``). With
``--leader-elect`` every replica watches and keeps its cache and queues warm, but only the holder of
the Lease (``kopf-scheduler``, or ``kopf-scheduler-<policy>`` for a ``--policy`` shard) runs the
scheduling loops; when the term ends the loops pause and the replica stands as a candidate again.
The endpoints /healthz, /livez, /readyz, /metrics and /debug/attempts/NAMESPACE/NAME are served as
kube-scheduler serves them (``kube/serving.py``): HTTPS on ``--secure-port`` (10259; 0 turns it off),
bearer tokens reviewed by TokenReview and client certificates by the cluster's CA, each request
authorized by a SubjectAccessReview of its verb and path, the probes' paths always allowed; the flags
are upstream's, with upstream's defaults. ``--insecure-port N`` serves them as well over plain HTTP
with no authentication, on 127.0.0.1 unless ``--insecure-bind-address`` says otherwise: for
development only. ``--record DIR`` keeps a bounded, rotating trace of what scheduling saw (nodes, pods
as scheduling reads them, policy versions, every decision) for ``kopf-scheduler replay``
(``edge/recorder.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import signal
import sys
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ..edge.credentials import Credentials
    from ..kube.serving import ServingOptions

__all__ = ["add_parser", "duration", "run", "serving_options"]

logger = logging.getLogger(__name__)

_UNITS: Final = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION: Final = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
METRICS_PORT_GONE: Final = (
    "--metrics-port is gone: the endpoints are served over HTTPS with authentication on --secure-port"
    " (10259 by default); for development, --insecure-port N serves them over plain HTTP on 127.0.0.1"
    ' (README, "The secure port")'
)


def duration(text: str) -> float:
    """Seconds of a Go duration as upstream's flags take it (``10s``, ``1m30s``, ``500ms``), or of a
    plain number of seconds."""
    text = text.strip()
    try:
        return float(text)
    except ValueError:
        pass
    if not text or _DURATION.sub("", text):
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 10s, 1m30s, 500ms)")
    return sum(float(number) * _UNITS[unit] for number, unit in _DURATION.findall(text))


def _paths(text: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in text.split(",") if p.strip())


def add_parser(subparsers: Any, name: str, help: str) -> argparse.ArgumentParser:
    p: argparse.ArgumentParser = subparsers.add_parser(name, help=help, description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    p.add_argument("--leader-elect", action="store_true", help="elect one active replica through a Lease")
    p.add_argument("--lease-namespace", default=os.environ.get("POD_NAMESPACE") or "kube-system")
    p.add_argument("--lease-duration", type=int, default=15, help="seconds (default 15)")
    p.add_argument("--renew-deadline", type=float, default=10.0, help="seconds (default 10)")
    p.add_argument("--retry-period", type=float, default=2.0, help="seconds (default 2)")
    p.add_argument(
        "--policy", action="append", default=[], metavar="NAME", help="serve only this SchedulingPolicy (repeatable)"
    )
    p.add_argument("--metrics-port", type=int, help=argparse.SUPPRESS)  # refused with METRICS_PORT_GONE
    p.add_argument(
        "--watch-idle-timeout",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="give up a watch that delivered nothing, not even a bookmark, for this long"
        " (default 120: twice the API server's bookmark interval)",
    )
    p.add_argument("--record", metavar="DIR", help="write a trace of what scheduling saw into DIR (for replay)")
    p.add_argument(
        "--record-segment-mb", type=float, default=32.0, metavar="MB", help="with --record: bytes per segment (32)"
    )
    p.add_argument("--record-segments", type=int, default=8, metavar="N", help="with --record: segments kept (8)")
    p.add_argument("--verbose", action="store_true")
    _add_serving_flags(p)
    p.set_defaults(func=run)
    return p


def _add_serving_flags(p: argparse.ArgumentParser) -> None:
    """kube-scheduler's secure serving, authentication and authorization flags (upstream's names and
    defaults: k8s.io/apiserver pkg/server/options), and the development-only insecure port."""
    from ..telemetry.access import CACHE_TTL, DEFAULT_ALWAYS_ALLOW_PATHS

    g = p.add_argument_group("secure serving: /healthz /livez /readyz /metrics /debug over HTTPS, as kube-scheduler")
    g.add_argument("--secure-port", type=int, default=10259, help="the HTTPS port (default 10259; 0 = off)")
    g.add_argument("--bind-address", default="0.0.0.0", help="the address it listens on (default 0.0.0.0)")
    g.add_argument("--tls-cert-file", metavar="FILE", help="serving certificate (PEM; default: self-signed at start)")
    g.add_argument("--tls-private-key-file", metavar="FILE", help="its key (PEM)")
    g.add_argument(
        "--client-ca-file",
        metavar="FILE",
        help="CA bundle that client certificates are verified against (default: the cluster's, from"
        " configmap kube-system/extension-apiserver-authentication)",
    )
    g.add_argument(
        "--authentication-skip-lookup",
        action="store_true",
        help="do not read the client CA from the cluster (client certificates then do not authenticate)",
    )
    g.add_argument(
        "--authentication-token-webhook-cache-ttl",
        type=duration,
        default=CACHE_TTL,
        metavar="DURATION",
        help="how long TokenReview answers are kept (default 10s)",
    )
    g.add_argument(
        "--authorization-webhook-cache-authorized-ttl",
        type=duration,
        default=CACHE_TTL,
        metavar="DURATION",
        help="how long allowing SubjectAccessReview answers are kept (default 10s)",
    )
    g.add_argument(
        "--authorization-webhook-cache-unauthorized-ttl",
        type=duration,
        default=CACHE_TTL,
        metavar="DURATION",
        help="how long denying SubjectAccessReview answers are kept (default 10s)",
    )
    g.add_argument(
        "--authorization-always-allow-paths",
        type=_paths,
        default=DEFAULT_ALWAYS_ALLOW_PATHS,
        metavar="PATHS",
        help="paths anyone may GET, comma-separated; a trailing * matches a prefix (default /healthz,/readyz,/livez)",
    )
    d = p.add_argument_group("development only")
    d.add_argument(
        "--insecure-port",
        type=int,
        default=0,
        metavar="PORT",
        help="also serve the endpoints over plain HTTP with NO authentication (default 0 = off)",
    )
    d.add_argument(
        "--insecure-bind-address", default="127.0.0.1", help="the address the insecure port listens on (127.0.0.1)"
    )


def serving_options(args: argparse.Namespace) -> ServingOptions | str:
    """The serving flags as ``ServingOptions``, or what is wrong with them."""
    from ..kube.serving import ServingOptions
    from ..telemetry.access import DEFAULT_ALWAYS_ALLOW_GROUPS, AccessPolicy, path_pattern_errors

    if args.metrics_port is not None:
        return METRICS_PORT_GONE
    for flag in ("secure_port", "insecure_port"):
        if not 0 <= getattr(args, flag) <= 65535:
            return f"--{flag.replace('_', '-')} must be 0 to 65535"
    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        return "--tls-cert-file and --tls-private-key-file go together"
    for flag in ("tls_cert_file", "tls_private_key_file", "client_ca_file"):
        path = getattr(args, flag)
        if path and not os.path.isfile(path):
            return f"--{flag.replace('_', '-')} {path}: no such file"
    errors = path_pattern_errors(args.authorization_always_allow_paths)
    if errors:
        return "--authorization-always-allow-paths: " + "; ".join(errors)
    return ServingOptions(
        secure_port=args.secure_port,
        bind_address=args.bind_address,
        tls_cert_file=args.tls_cert_file,
        tls_private_key_file=args.tls_private_key_file,
        client_ca_file=args.client_ca_file,
        skip_lookup=args.authentication_skip_lookup,
        access=AccessPolicy(
            always_allow_paths=tuple(args.authorization_always_allow_paths),
            always_allow_groups=DEFAULT_ALWAYS_ALLOW_GROUPS,
            token_ttl=args.authentication_token_webhook_cache_ttl,
            allowed_ttl=args.authorization_webhook_cache_authorized_ttl,
            denied_ttl=args.authorization_webhook_cache_unauthorized_ttl,
        ),
        insecure_port=args.insecure_port,
        insecure_bind_address=args.insecure_bind_address,
    )


def run(args: argparse.Namespace) -> int:
    from .. import kube  # noqa: F401  # first: it imports Kopf without the kubernetes client (its docstring)

    # isort: split
    import kopf

    from ..edge.credentials import CredentialsError, load_credentials

    kopf.configure(verbose=args.verbose)
    if args.record and (args.record_segments < 1 or args.record_segment_mb * 1024 * 1024 < 1024):
        print("kopf-scheduler run: --record-segments must be >= 1 and --record-segment-mb >= 0.001", file=sys.stderr)
        return 2
    serving = serving_options(args)
    if isinstance(serving, str):
        print(f"kopf-scheduler run: {serving}", file=sys.stderr)
        return 2
    try:
        credentials = load_credentials(args.kubeconfig)
    except CredentialsError as exc:
        print(f"kopf-scheduler run: {exc}", file=sys.stderr)
        return 2
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(_serve(args, credentials, serving))
    except KeyboardInterrupt:
        pass
    return 0


def _loop_factory() -> Any:
    """uvloop's event loop when it is installed (as ``kopf run`` picks it too), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


async def _serve(args: argparse.Namespace, credentials: Credentials, serving: ServingOptions) -> None:
    import kopf

    from ..edge.client import Api
    from ..kube import handlers
    from ..kube.app import App
    from ..kube.leader import ApiLeaseClient, LeaderElectionConfig, LeaderElector, default_identity
    from ..kube.login import user_agent
    from ..kube.serving import serve
    from ..kube.supervision import KopfSupervisor

    identity = default_identity()
    # Kopf's login, the informers, the writes and the Lease all use these credentials
    api = Api(credentials, user_agent=user_agent(identity), watch_idle_timeout=args.watch_idle_timeout)
    app = App(api, identity=identity, leader_election=args.leader_elect)
    app.supervised = True  # Kopf's cleanup leaves the App to this function (a restarted Kopf finds it running)
    if args.record:
        from ..edge.recorder import Recorder

        app.recorder = Recorder(
            args.record, segment_bytes=int(args.record_segment_mb * 1024 * 1024), segments=args.record_segments
        )
        app.recorder.start()
        logger.info("recording the scheduling trace into %s", args.record)
    registry = kopf.OperatorRegistry()
    policies = frozenset(args.policy) if args.policy else None
    handlers.register(registry, policies=policies)
    settings = kopf.OperatorSettings()
    shard = "-".join(sorted(policies)) if policies else ""
    handlers.configure(settings, shard=shard, watch_idle_timeout=args.watch_idle_timeout)
    background: list[asyncio.Task[Any]] = []
    servers: list[Any] = []

    async def shutdown() -> None:
        """One of the App's shutdown hooks (run once Kopf stopped for good): pause the loops, leave
        the Lease (a standby takes over at once), stop the endpoints' servers."""
        app.leading.clear()
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        background.clear()
        while servers:
            await servers.pop().stop()

    app.on_shutdown.append(shutdown)
    elector: LeaderElector | None = None
    if args.leader_elect:
        lease_name = handlers.shard_name(shard)
        config = LeaderElectionConfig(
            lease_name=lease_name,
            lease_namespace=args.lease_namespace,
            identity=identity,
            lease_duration=args.lease_duration,
            renew_deadline=args.renew_deadline,
            retry_period=args.retry_period,
        )
        elector = LeaderElector(config, ApiLeaseClient(api, name=lease_name, namespace=args.lease_namespace))
        api.fence = elector.term_valid  # every other write asks whether our term is still valid
        background.append(asyncio.create_task(_elect(app, elector)))

    async def spawn(stop: asyncio.Event) -> Any:
        return await kopf.spawn_tasks(
            registry=registry,
            settings=settings,
            memo=kopf.Memo(app=app),
            standalone=True,
            clusterwide=True,
            stop_flag=stop,
        )

    supervisor = KopfSupervisor(spawn, settings=settings, on_restart=app.metrics.inc_kopf_restarts)
    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, _dump_cache, app)
    servers += await serve(
        serving,
        api,
        ready_check=lambda: _ready(app, supervisor),
        live_check=supervisor.healthy,
        metrics=app.metrics,
        leading=(lambda: elector.is_leader) if elector is not None else None,
        attempts=app.explain,
    )
    handlers.start(app)  # the informers run outside Kopf: a restarted Kopf finds them warm
    try:
        await supervisor.run()
    finally:
        app.leading.clear()
        for hook in app.on_shutdown:
            try:
                await hook()
            except Exception:
                logger.exception("a shutdown step failed")
        await app.api.close()
        if app.recorder is not None:
            await asyncio.to_thread(app.recorder.close)


def _ready(app: Any, supervisor: Any) -> tuple[bool, str]:
    """Ready once Kopf runs (it brings the pending pods) and every kind is listed."""
    if not supervisor.running:
        again = f" again after {supervisor.restarts} failure(s)" if supervisor.restarts else ""
        return False, f"Kopf's orchestration is starting{again}"
    ready: tuple[bool, str] = app.ready()
    return ready


def _dump_cache(app: Any) -> None:
    """SIGUSR2: log the cache node by node and the queues (``core/state/dump.py``), as kube-scheduler does."""
    from ..core.state.dump import dump_lines

    for line in dump_lines(app.cache, {name: state.queue for name, state in app.states.items()}):
        logger.info("%s", line)


async def _elect(app: Any, elector: Any) -> None:
    """Stand as a candidate forever: lead while elected, pause the loops between terms."""

    from ..kube import events

    async def started() -> None:
        logger.info("%s: leading; the scheduling loops run", elector.identity)
        app.leading.set()
        app.wake()
        app.spawn(app.rewrite_policy_statuses())
        app.spawn(events.recover_scheduled(app))
        await asyncio.Event().wait()

    async def stopped() -> None:
        logger.info("%s: not leading; the scheduling loops pause", elector.identity)
        app.leading.clear()

    while True:
        await elector.run(started, stopped)
