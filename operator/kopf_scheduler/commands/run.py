"""``kopf-scheduler run``: the production entry; runs Kopf programmatically with our own registry.

    kopf-scheduler run [--kubeconfig F] [--leader-elect] [--lease-namespace NS]
                       [--lease-duration 15 --renew-deadline 10 --retry-period 2]
                       [--policy NAME ...] [--metrics-port 10259] [--verbose]
                       [--record DIR [--record-segment-mb 32] [--record-segments 8]]

Kopf runs standalone (no Kopf peering) and cluster-wide. SIGUSR2 logs what the scheduler believes:
every cached node with its requested resources and pods, and the queues (``core/dump.py``). With
``--leader-elect`` every replica watches and keeps its cache and queues warm, but only the holder of
the Lease (``kopf-scheduler``, or ``kopf-scheduler-<policy>`` for a ``--policy`` shard) runs the
scheduling loops; when the term ends the loops pause and the replica stands as a candidate again.
The health server serves /healthz, /readyz, /metrics and /debug/attempts/NAMESPACE/NAME (port 0
turns it off). ``--record DIR`` keeps a bounded, rotating trace of what scheduling saw (nodes, pods
as scheduling reads them, policy versions, every decision) for ``kopf-scheduler replay``
(``edge/recorder.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..edge.credentials import Credentials

__all__ = ["add_parser", "run"]

logger = logging.getLogger(__name__)


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
    p.add_argument("--metrics-port", type=int, default=10259, help="health and metrics port (default 10259, 0 = off)")
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
    p.set_defaults(func=run)
    return p


def run(args: argparse.Namespace) -> int:
    import kopf

    from ..edge.credentials import CredentialsError, load_credentials

    kopf.configure(verbose=args.verbose)
    if args.record and (args.record_segments < 1 or args.record_segment_mb * 1024 * 1024 < 1024):
        print("kopf-scheduler run: --record-segments must be >= 1 and --record-segment-mb >= 0.001", file=sys.stderr)
        return 2
    try:
        credentials = load_credentials(args.kubeconfig)
    except CredentialsError as exc:
        print(f"kopf-scheduler run: {exc}", file=sys.stderr)
        return 2
    try:
        with asyncio.Runner(loop_factory=_loop_factory()) as runner:
            runner.run(_serve(args, credentials))
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


async def _serve(args: argparse.Namespace, credentials: Credentials) -> None:
    import kopf

    from ..edge.client import Api
    from ..kube import handlers
    from ..kube.app import App
    from ..kube.leader import ApiLeaseClient, LeaderElectionConfig, LeaderElector, default_identity
    from ..kube.login import user_agent
    from ..telemetry.health import start_health_server

    identity = default_identity()
    # Kopf's login, the informers, the writes and the Lease all use these credentials
    api = Api(credentials, user_agent=user_agent(identity), watch_idle_timeout=args.watch_idle_timeout)
    app = App(api, identity=identity, leader_election=args.leader_elect)
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
    health: Any = None

    async def shutdown() -> None:
        """Kopf's cleanup runs this: pause the loops, leave the Lease (a standby takes over at
        once), stop the health server. Our tasks must end inside Kopf's cleanup: Kopf waits 5 s
        for any task still running after it, then cancels it, which would cut the release short."""
        nonlocal health
        app.leading.clear()
        for task in background:
            task.cancel()
        await asyncio.gather(*background, return_exceptions=True)
        background.clear()
        if health is not None:
            server, health = health, None
            await server.stop()

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

    asyncio.get_running_loop().add_signal_handler(signal.SIGUSR2, _dump_cache, app)
    if args.metrics_port:
        health = await start_health_server(
            "0.0.0.0",
            args.metrics_port,
            ready_check=app.ready,
            metrics=app.metrics,
            leading=(lambda: elector.is_leader) if elector is not None else None,
            attempts=app.explain,
            about={"identity": identity, "server": credentials.server, "entry": "kopf-scheduler run"},
        )
        logger.info("health and metrics on port %d", health.port)
    operator = asyncio.ensure_future(
        kopf.operator(
            registry=registry,
            settings=settings,
            memo=kopf.Memo(app=app),
            standalone=True,
            clusterwide=True,
        )
    )
    try:
        await operator
    finally:
        await shutdown()  # a no-op after Kopf's cleanup ran it
        await app.api.close()
        if app.recorder is not None:
            await asyncio.to_thread(app.recorder.close)


def _dump_cache(app: Any) -> None:
    """SIGUSR2: log the cache node by node and the queues (``core/dump.py``), as kube-scheduler does."""
    from ..core.dump import dump_lines

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
