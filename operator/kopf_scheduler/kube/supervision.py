"""``KopfSupervisor``: Kopf's orchestration run by ``kopf-scheduler run``, and run again when it fails.

Kopf ends its whole orchestration, and with it the process, when any of its root tasks fails: a
discovery answer cut short at start-up (``ClientPayloadError`` while ``scanning`` reads a body, which
its request retries do not cover), a watch stream's error event other than 410 (``WatchingError``),
an API error that outlasted its ``error_backoffs``. Through a flaky network that is a crash loop.

So the CLI runs Kopf's root tasks itself, with Kopf's public ``spawn_tasks``, instead of
``kopf.operator`` (whose ``run_tasks`` would also cancel every task the process started meanwhile:
the leader elector's term, binds in flight). When a root task ends on an error, the supervisor stops
the others, lets Kopf's cleanup run, cancels what Kopf left behind (only Kopf's own tasks, after 2 s
of grace) and spawns Kopf again after a backoff (0.5 s doubling to 8 s, reset by a run that lasted
``STABLE`` seconds). The cap is short on purpose: a failed start costs the API server a few discovery
answers, and through a network that cuts one answer in five Kopf fails most of its starts; with 30 s
the tenth start of a run of bad draws came minutes late (171 s to the first bind in one measured start-up).
Everything the App runs outside Kopf goes on meanwhile: the informers, the cache and the queues stay warm,
binds in flight finish, the Lease is held. On the restart Kopf lists the unassigned pods and the policies
again (the handlers take them as they take a relist), and the policies' daemons resume their loops.

The supervisor owns SIGINT and SIGTERM: it takes them back from Kopf after each ``spawn_tasks`` and
stops Kopf through its ``stop_flag``; it also arms Kopf's "ultimate exit" itself (a SIGKILL after
``settings.process.ultimate_exiting_timeout`` seconds, as Kopf would), because Kopf's own arms
whenever its root tasks are cancelled without the stop flag, which a restart does.

``healthy()`` is what /healthz reports: false once Kopf has failed for ``UNHEALTHY_AFTER`` seconds
(at least ``UNHEALTHY_FAILURES`` times) with no stable run in between, so that the kubelet restarts a
process that cannot recover by itself.

``kopf run -m kopf_scheduler.kube.main`` cannot be supervised this way: Kopf's CLI owns the loop and
ends when its orchestration does (README: the development path, a Deployment's restarts, or
``kopf-scheduler run``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Callable, Collection, Coroutine
from typing import Any, Final

import kopf

__all__ = ["BACKOFF_FIRST", "BACKOFF_MAX", "STABLE", "UNHEALTHY_AFTER", "UNHEALTHY_FAILURES", "KopfSupervisor"]

logger = logging.getLogger(__name__)

BACKOFF_FIRST: Final = 0.5
BACKOFF_MAX: Final = 8.0
#: seconds a run must last for the next failure to count as the first in a row
STABLE: Final = 60.0
#: seconds of failing without a stable run after which /healthz reports the process as unable to recover
UNHEALTHY_AFTER: Final = 300.0
#: ... provided Kopf failed at least this many times in them
UNHEALTHY_FAILURES: Final = 10
#: seconds Kopf's leftover tasks get to finish before they are cancelled (``kopf.run_tasks`` gives 5 s,
#: at the process's end; here a restart waits for it, and its root tasks have stopped already)
LEFTOVER_GRACE: Final = 2.0
#: seconds the cancelled root tasks get to end (Kopf's cleanup activity runs in one of them)
ROOT_GRACE: Final = 30.0


class KopfSupervisor:
    """Runs Kopf's root tasks until stopped, again after each failure; see the module docstring.

    `spawn` starts one Kopf run: ``kopf.spawn_tasks`` with the operator's registry, settings and memo,
    and the supervisor's ``stop`` as its stop flag. `on_restart` is told of each failure (a metric).
    `clock` times the runs and the failing streak (``STABLE``, ``UNHEALTHY_AFTER``); tests give one they
    move on themselves. The backoffs are slept on the event loop.
    """

    def __init__(
        self,
        spawn: Callable[[asyncio.Event], Coroutine[Any, Any, Collection[asyncio.Task[Any]]]],
        *,
        settings: kopf.OperatorSettings,
        on_restart: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._spawn = spawn
        self._clock = clock
        self._on_restart = on_restart
        #: set by SIGINT/SIGTERM (or ``request_stop``): Kopf stops, and is not started again
        self.stop = asyncio.Event()
        #: Kopf's failures since the last run that lasted ``STABLE`` seconds, and when the first of them was
        self.failures = 0
        self.failing_since: float | None = None
        self.restarts = 0
        self.running = False
        self._ultimate = settings.process.ultimate_exiting_timeout
        settings.process.ultimate_exiting_timeout = None  # see the module docstring: ours is armed on signals
        self._kill: asyncio.TimerHandle | None = None

    def healthy(self) -> tuple[bool, str]:
        failing = 0.0 if self.failing_since is None else self._clock() - self.failing_since
        if self.failures >= UNHEALTHY_FAILURES and failing >= UNHEALTHY_AFTER:
            return False, f"Kopf's orchestration failed {self.failures} times in a row over {failing:.0f}s"
        return True, "ok"

    def request_stop(self) -> None:
        self.stop.set()

    async def run(self) -> None:
        """Run Kopf until ``stop`` is set; a failure is logged and Kopf started again after a backoff."""
        self._take_signals()
        backoff = BACKOFF_FIRST
        while not self.stop.is_set():
            started = self._clock()
            error = await self._run_once()
            if self.stop.is_set():
                return
            lasted = self._clock() - started
            if lasted >= STABLE:
                self.failures, self.failing_since, backoff = 0, None, BACKOFF_FIRST
            if self.failing_since is None:
                self.failing_since = started
            self.failures += 1
            self.restarts += 1
            if self._on_restart is not None:
                self._on_restart()
            logger.error(
                "Kopf's orchestration ended after %.1fs (%s); starting it again in %.0fs"
                " (the informers, the cache and the queues stay warm)",
                lasted,
                error,
                backoff,
            )
            try:
                await asyncio.wait_for(self.stop.wait(), backoff)
            except TimeoutError:
                pass
            backoff = min(backoff * 2, BACKOFF_MAX)

    async def _run_once(self) -> str:
        """One Kopf run, until a root task ends; returns what ended it."""
        existing = asyncio.all_tasks()
        roots = set(await self._spawn(self.stop))
        self._take_signals()  # spawn_tasks gave SIGINT and SIGTERM to Kopf's own flag
        self.running = True
        try:
            done, pending = await asyncio.wait(roots, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self.running = False
        ended = next(iter(done))
        why = _outcome(ended)
        for task in pending:
            task.cancel()
        _, stuck = await asyncio.wait(pending, timeout=ROOT_GRACE) if pending else (set(), set())
        for task in stuck:
            logger.warning("Kopf's root task %s did not stop within %gs", task.get_name(), ROOT_GRACE)
        for task in done | pending:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: the guard already logged it
        await _stop_leftovers(existing | roots)
        return why

    def _take_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
            except (NotImplementedError, RuntimeError):  # not the main thread (tests): stop by request_stop
                return

    def _on_signal(self, sig: signal.Signals) -> None:
        logger.info("%s received: stopping", sig.name)
        self.stop.set()
        if self._kill is None and self._ultimate is not None:
            self._kill = asyncio.get_running_loop().call_later(self._ultimate, os.kill, os.getpid(), signal.SIGKILL)


def _outcome(task: asyncio.Task[Any]) -> str:
    if task.cancelled():
        return f"its task {task.get_name()!r} was cancelled"
    error = task.exception()
    if error is None:
        return f"its task {task.get_name()!r} ended"
    return f"{task.get_name()}: {type(error).__name__}: {error}"


async def _stop_leftovers(existing: Collection[asyncio.Task[Any]]) -> None:
    """Kopf's tasks that outlived its root tasks (workers, handlers): a grace to finish, then cancelled.
    Tasks of ours (binds, events, the leader elector's) are left alone."""
    leftovers = {t for t in asyncio.all_tasks() if t not in existing and not t.done() and _is_kopfs(t)}
    leftovers.discard(asyncio.current_task())
    if not leftovers:
        return
    _, pending = await asyncio.wait(leftovers, timeout=LEFTOVER_GRACE)
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


def _is_kopfs(task: asyncio.Task[Any]) -> bool:
    code = getattr(task.get_coro(), "cr_code", None)
    return code is not None and f"{os.sep}kopf{os.sep}" in code.co_filename
