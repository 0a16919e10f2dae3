"""What every fault test is made of: ``Rig`` (nodes, a policy, operators under the deploy/ identity,
a steady producer of pods) and its verdict after the fault.

The verdict, after each fault (``Rig.verdict``):

- every pod is bound, or Pending with a FailedScheduling event;
- no pod was bound twice: the audit log holds at most one successful (201) pods/binding per pod
  (exactly one when the API server kept its audit log through the fault), and each bound pod
  has at most one Scheduled event, naming the node it is on;
- a 409 on binding (someone bound the pod first) is handled: never a FailedScheduling event;
- the operator's cache (its SIGUSR2 dump) has, per node, the pods and the requested cpu and
  memory that the API server says are bound there, with nothing left assumed;
- the bearer token the operator used appears nowhere in its log.

Conditions are waited for with deadlines (``kube_helpers.wait``), never with sleeps; the figures
(recovery times, 409s, pods lost, double binds) go into ``Figures`` for the test to print.

Who wrote what: the audit log (conftest.AUDIT_POLICY) holds every write a scheduler makes with its
user agent; ``writes`` reads it and ``Rig.writes_by`` keeps one replica's (the operator names its own
requests ``kopf-scheduler/<version> (<identity>)``; Kopf's carry Kopf's user agent). ``Rig.pause``
and ``Rig.resume`` freeze and thaw an operator (SIGSTOP, SIGCONT) and say when, in the audit log's clock.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kube_helpers import Group, Operator, create_policy, delete_policy, wait, wait_accepted, wait_for
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kopf_scheduler.cluster import ControlPlane
from kopf_scheduler.core.model.resources import to_milli, to_units

#: the operator's identity under deploy/rbac.yaml
OPERATOR_USER = "system:serviceaccount:kopf-scheduler:kopf-scheduler"
#: client calls during a fault must give up quickly and be retried, not hang for the default minute
CALL_TIMEOUT = 5


def log(message: str) -> None:
    """A figure for the report: printed at once (pytest shows it with -s, and in the captured output)."""
    print(f"[faults] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the audit log


def audit_events(audit_log: Path) -> Iterator[dict[str, Any]]:
    """The audit log's events in order (a line cut short by a SIGKILL of the API server is skipped)."""
    if not audit_log.exists():
        return
    for line in audit_log.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event


@dataclass(frozen=True, slots=True)
class BindingRequest:
    """One pods/binding request as the API server's audit log recorded it."""

    pod: str
    node: str
    code: int
    user: str
    user_agent: str = ""
    time: datetime | None = None  # when the API server received it (UTC)
    stage: str = ""  # ResponseComplete, or Panic

    @property
    def outcome_unknown(self) -> bool:
        """The API server wrote no answer the client could read: the client went away (a cut connection, a
        killed process) while the request ran, so the Binding may have been stored with no 201 in the log."""
        return self.code == 0 or self.code >= 500 or self.stage == "Panic"

    @property
    def identity(self) -> str:
        """The operator replica that sent it (as ``Write.identity``), or "" when it was not ours."""
        match = OPERATOR_USER_AGENT.fullmatch(self.user_agent)
        return match["identity"] if match else ""


def binding_requests(audit_log: Path, namespace: str) -> list[BindingRequest]:
    out = []
    for event in audit_events(audit_log):
        ref = event.get("objectRef") or {}
        if ref.get("subresource") != "binding" or ref.get("namespace") != namespace:
            continue
        target = ((event.get("requestObject") or {}).get("target") or {}).get("name", "")
        code = int((event.get("responseStatus") or {}).get("code") or 0)
        user = (event.get("user") or {}).get("username", "")
        stamp = event.get("requestReceivedTimestamp") or event.get("stageTimestamp")
        received = datetime.fromisoformat(stamp) if stamp else None
        out.append(
            BindingRequest(
                ref.get("name", ""), target, code, user, event.get("userAgent", ""), received, event.get("stage", "")
            )
        )
    return out


#: what the operator sends on each request it makes itself (kube/login.py: user_agent)
OPERATOR_USER_AGENT = re.compile(r"kopf-scheduler/\S+ \((?P<identity>.+)\)")
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})


@dataclass(frozen=True, slots=True)
class Write:
    """One write the audit log recorded (conftest.AUDIT_POLICY logs those a scheduler makes)."""

    time: datetime  # when the API server received it (UTC)
    verb: str  # create, update, patch, delete, deletecollection
    resource: str  # pods, events, leases, schedulingpolicies...
    subresource: str  # binding, status, eviction, or ""
    namespace: str  # "" for cluster-scoped objects
    name: str  # "" for a create named by its body (events) and for deletecollection
    user_agent: str
    code: int  # the answer's HTTP status; 0 when the request never completed (a panic)
    group: str = ""  # the API group: "" (core), events.k8s.io, coordination.k8s.io...
    user: str = ""

    @property
    def identity(self) -> str:
        """The operator replica that made it (its user agent's ``(<identity>)``), or "" when it was not ours."""
        match = OPERATOR_USER_AGENT.fullmatch(self.user_agent)
        return match["identity"] if match else ""

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300


def writes(audit_log: Path, namespace: str | None = None, since: datetime | None = None) -> list[Write]:
    """Every write in the audit log, in order; only `namespace`'s ("" for cluster-scoped objects), only
    those received at `since` (a UTC-aware datetime, e.g. ``Pause.resumed``) or later."""
    out = []
    for event in audit_events(audit_log):
        if event.get("verb") not in WRITE_VERBS:
            continue
        ref = event.get("objectRef") or {}
        if namespace is not None and ref.get("namespace", "") != namespace:
            continue
        stamp = event.get("requestReceivedTimestamp") or event.get("stageTimestamp")
        if not stamp:
            continue
        received = datetime.fromisoformat(stamp)
        if since is not None and received < since:
            continue
        out.append(Write(
            received, event["verb"], ref.get("resource", ""), ref.get("subresource", ""), ref.get("namespace", ""),
            ref.get("name", ""), event.get("userAgent", ""), int((event.get("responseStatus") or {}).get("code") or 0),
            ref.get("apiGroup", ""), (event.get("user") or {}).get("username", ""),
        ))  # fmt: skip
    return out


def secrets_of(kubeconfig: Path) -> list[str]:
    """The bearer token, the client key (base64 as written, and its PEM body lines) of a kubeconfig's user."""
    user = json.loads(kubeconfig.read_text())["users"][0]["user"]
    out = []
    if user.get("token"):
        out.append(user["token"])
    if user.get("client-key-data"):
        out.append(user["client-key-data"])
        pem = base64.b64decode(user["client-key-data"]).decode()
        out.extend(line for line in pem.splitlines() if line and not line.startswith("-----"))
    return out


# --------------------------------------------------------------------------- the producer


class Producer(threading.Thread):
    """Creates pods in order as a workload controller would, through outages: a failed create is
    tried again (a create that worked but whose answer was lost comes back 409 AlreadyExists: done).
    `rate`: pods per second at most (None: as fast as the API server takes them)."""

    def __init__(
        self,
        core: client.CoreV1Api,
        namespace: str,
        bodies: Sequence[dict[str, Any]],
        *,
        after_create: Callable[[dict[str, Any]], None] | None = None,
        rate: float | None = None,
    ) -> None:
        super().__init__(name="producer", daemon=True)
        self.core, self.namespace, self.bodies = core, namespace, list(bodies)
        self.after_create = after_create
        self.rate = rate
        self.created = 0
        self.retries = 0
        self.stopped = threading.Event()
        self.problems: list[BaseException] = []

    def run(self) -> None:
        try:
            started = time.monotonic()
            for i, body in enumerate(self.bodies):
                if self.rate is not None:
                    self.stopped.wait(max(0.0, started + i / self.rate - time.monotonic()))
                while not self.stopped.is_set():
                    try:
                        self.core.create_namespaced_pod(self.namespace, body, _request_timeout=CALL_TIMEOUT)
                        break
                    except ApiException as exc:
                        if exc.status == 409:
                            break
                        self.retries += 1
                    except Exception:  # connection refused or reset, timeouts: the API server is down
                        self.retries += 1
                    self.stopped.wait(0.2)
                self.created += 1
                if self.after_create is not None:
                    self.after_create(body)
        except BaseException as exc:  # a bug of the test itself: surfaced by done()
            self.problems.append(exc)

    def done(self, timeout: float) -> None:
        self.join(timeout)
        assert not self.is_alive(), f"the producer created only {self.created}/{len(self.bodies)} pods in {timeout}s"
        assert not self.problems, self.problems


# --------------------------------------------------------------------------- freezing an operator


@dataclass
class Pause:
    """One SIGSTOP ... SIGCONT of an operator. Wall-clock times are UTC, the audit log's clock (the API
    server runs on this machine): ``writes(..., since=pause.resumed)`` are the writes made after the thaw."""

    op: Operator
    stopped: datetime  # the process was seen stopped: it sent nothing from here on
    stopped_at: float  # time.monotonic() then
    resumed: datetime | None = None  # just before SIGCONT: it can send nothing before this
    resumed_at: float | None = None

    @property
    def seconds(self) -> float:
        """How long it was (or has been, so far) frozen."""
        return (self.resumed_at if self.resumed_at is not None else time.monotonic()) - self.stopped_at


def process_state(pid: int) -> str:
    """The kernel's one-letter state of `pid` (R, S, T for stopped, Z...); "" when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return ""
    return stat[stat.rindex(")") + 2 :].split()[0]  # the command name may hold spaces


# --------------------------------------------------------------------------- figures


@dataclass
class Figures:
    """What one fault test observed (printed for the issue's closing note)."""

    pods: int = 0
    bound: int = 0
    pending: int = 0
    lost: int = 0  # neither bound nor Pending with a FailedScheduling event
    double_binds: int = 0  # pods with more than one successful pods/binding
    conflicts: int = 0  # 409s the operator got on pods/binding
    extra: dict[str, Any] = field(default_factory=dict)

    def line(self, name: str) -> str:
        extra = ", ".join(f"{k} {v}" for k, v in self.extra.items())
        return (
            f"{name}: {self.pods} pods, bound {self.bound}, pending {self.pending}, lost {self.lost}, "
            f"double binds {self.double_binds}, 409s on binding {self.conflicts}" + (f", {extra}" if extra else "")
        )


# --------------------------------------------------------------------------- the rig


class Rig:
    """One fault test's world; see the module docstring."""

    def __init__(
        self,
        cp: ControlPlane,
        api: client.ApiClient,
        custom: client.CustomObjectsApi,
        sa_kubeconfig: Path,
        namespace: str,
        audit_log: Path,
        tmp_path: Path,
    ) -> None:
        self.cp, self.api, self.custom, self.sa_kubeconfig = cp, api, custom, sa_kubeconfig
        self.core = client.CoreV1Api(api)
        self.namespace, self.audit_log, self.tmp_path = namespace, audit_log, tmp_path
        self.scheduler = f"fault-{uuid.uuid4().hex[:6]}"
        self.group = Group(api, scheduler=self.scheduler)
        self.operators: list[Operator] = []
        self.kubeconfigs: dict[Operator, Path] = {}
        self.policies: list[str] = []
        self.producers: list[Producer] = []
        self.pauses: list[Pause] = []

    # ---- setting up

    def policy(self, spec: dict[str, Any] | None = None, *, name: str | None = None) -> str:
        """A SchedulingPolicy serving this rig's scheduler name (DefaultProvider unless `spec` says more)."""
        name = name or self.scheduler
        create_policy(
            self.custom, name, {"schedulerName": self.scheduler, "algorithmProvider": "DefaultProvider", **(spec or {})}
        )
        self.policies.append(name)
        return name

    def operator(
        self, *flags: str, name: str = "operator", kubeconfig: Path | None = None, verbose: bool = True
    ) -> Operator:
        """`kopf-scheduler run` for this rig's policies (a --policy shard: it leaves other tests' policies alone)."""
        shard = [a for p in self.policies for a in ("--policy", p)]
        config = kubeconfig or self.sa_kubeconfig
        op = Operator(self.tmp_path / f"{name}-{len(self.operators)}.log", [*shard, *flags], config, verbose=verbose)
        self.operators.append(op)
        self.kubeconfigs[op] = config
        return op

    def accepted(self, op: Operator) -> None:
        for name in self.policies:
            wait_accepted(self.custom, name, op)

    def pods(
        self, n: int, *, prefix: str = "p", cpu: str = "100m", memory: str = "128Mi", **kwargs: Any
    ) -> list[dict[str, Any]]:
        return [self.group.pod(f"{prefix}-{i}", cpu=cpu, memory=memory, **kwargs) for i in range(n)]

    def produce(self, bodies: Sequence[dict[str, Any]], **kwargs: Any) -> Producer:
        producer = Producer(self.core, self.namespace, bodies, **kwargs)
        self.producers.append(producer)
        producer.start()
        return producer

    # ---- looking

    def placement(self) -> dict[str, str | None]:
        """Pod name -> node (None while pending); {} while the API server does not answer."""
        try:
            items = self.core.list_namespaced_pod(self.namespace, _request_timeout=CALL_TIMEOUT).items
        except Exception:
            return {}
        return {p.metadata.name: p.spec.node_name for p in items}

    def wait_bound(
        self, names: Iterable[str], *, timeout: float, op: Operator | None = None, at_least: int | None = None
    ) -> float:
        """Wait until all `names` (or `at_least` of them) are bound; returns when (time.monotonic())."""
        wanted = set(names)
        need = len(wanted) if at_least is None else at_least

        def enough() -> bool:
            placed = self.placement()
            return sum(1 for n in wanted if placed.get(n)) >= need

        wait(
            op or (self.operators[-1] if self.operators else None),
            enough,
            timeout=timeout,
            message=f"{need} of {len(wanted)} pods bound",
        )
        return time.monotonic()

    def events(self, reason: str) -> list[Any]:
        items = self.core.list_namespaced_event(self.namespace, _request_timeout=CALL_TIMEOUT).items
        return [e for e in items if e.reason == reason]

    def scheduled_events(self) -> dict[str, int]:
        """Pod name -> how many Scheduled events (core/v1 Event objects) name it in this namespace."""
        return dict(Counter(e.involved_object.name for e in self.events("Scheduled")))

    def writes(self, *, since: datetime | None = None, namespace: str | None = None) -> list[Write]:
        """Every write in the audit log (all namespaces unless told: Leases live in kopf-scheduler)."""
        return writes(self.audit_log, namespace, since)

    def writes_by(
        self, identity: str | Operator, *, since: datetime | None = None, namespace: str | None = None
    ) -> list[Write]:
        """The writes one operator replica made itself (its user agent names `identity`, as its start-up
        line does: ``Operator.identity``); Kopf's requests inside the same process are not counted."""
        who = identity.identity() if isinstance(identity, Operator) else identity
        if not who:
            raise ValueError("no identity: the operator has not logged its start-up line yet")
        return [w for w in self.writes(since=since, namespace=namespace) if w.identity == who]

    # ---- freezing

    def pause(self, op: Operator, *, timeout: float = 5.0) -> Pause:
        """SIGSTOP `op` (every thread) and wait until the kernel says it is stopped."""
        assert op.proc.poll() is None, f"{op.log}: the operator is not running"
        assert self.paused(op) is None, f"{op.log}: already paused"
        os.kill(op.proc.pid, signal.SIGSTOP)
        wait(op, lambda: process_state(op.proc.pid) in ("T", ""), timeout=timeout, message="the operator is stopped")
        pause = Pause(op, datetime.now(UTC), time.monotonic())
        self.pauses.append(pause)
        return pause

    def resume(self, op: Operator, *, timeout: float = 5.0) -> Pause:
        """SIGCONT `op`, paused by :meth:`pause`; the Pause records when (``resumed``, ``resumed_at``)."""
        pause = self.paused(op)
        assert pause is not None, f"{op.log}: not paused"
        pause.resumed, pause.resumed_at = datetime.now(UTC), time.monotonic()
        os.kill(op.proc.pid, signal.SIGCONT)
        wait(op, lambda: process_state(op.proc.pid) != "T", timeout=timeout, message="the operator runs again")
        return pause

    def paused(self, op: Operator) -> Pause | None:
        """The pause `op` is in now, if any."""
        return next((p for p in self.pauses if p.op is op and p.resumed is None), None)

    def resumed_at(self, op: Operator) -> datetime | None:
        """When `op` was last resumed (UTC, the audit log's clock), if ever."""
        return max((p.resumed for p in self.pauses if p.op is op and p.resumed is not None), default=None)

    # ---- the verdict

    def verdict(
        self, *, pods: Iterable[str], ops: Sequence[Operator], audit_complete: bool = True, timeout: float = 60.0
    ) -> Figures:
        """Check the module docstring's promises for `pods`, with the cache of each operator in `ops`
        (still running)."""
        names = set(pods)
        figures = Figures(pods=len(names))
        op = ops[-1] if ops else None

        def every_pod_accounted() -> dict[str, str | None] | None:
            placed = self.placement()
            if not names <= placed.keys():
                return None
            failed = {e.involved_object.name for e in self.events("FailedScheduling")}
            return placed if all(placed[n] or n in failed for n in names) else None

        placed = wait(
            op, every_pod_accounted, timeout=timeout, message="every pod bound or Pending with a FailedScheduling event"
        )
        bound = {n: placed[n] for n in names if placed[n]}
        figures.bound, figures.pending = len(bound), len(names) - len(bound)

        def audit_caught_up() -> list[BindingRequest] | None:
            # the API server writes a request's audit line after it answered, so a pod can be seen bound a moment
            # before its binding is in the log
            requests = binding_requests(self.audit_log, self.namespace)
            landed = {r.pod for r in requests if r.code == 201 or (r.outcome_unknown and r.node == bound.get(r.pod))}
            return requests if not audit_complete or set(bound) <= landed else None

        try:
            requests = wait_for(audit_caught_up, timeout=10.0, interval=0.2, message="the audit log has every binding")
        except TimeoutError:
            requests = binding_requests(self.audit_log, self.namespace)  # the assertions below say which is missing
        successes = Counter(r.pod for r in requests if r.code == 201)
        figures.double_binds = sum(1 for n in names if successes[n] > 1)
        figures.conflicts = sum(1 for r in requests if r.code == 409 and r.user == OPERATOR_USER and r.pod in names)
        assert figures.double_binds == 0, {n: c for n, c in successes.items() if c > 1}
        for name, node in bound.items():
            if audit_complete and successes[name] != 1:
                # no 201 at all is fine only when a request to that node may have landed without an answer
                mine = [r for r in requests if r.pod == name]
                lost = [r for r in mine if r.outcome_unknown and r.node == node]
                assert successes[name] == 0 and lost, (
                    f"{name} is on {node} but the audit log has {successes[name]} successful bindings: {mine}"
                )
            ok = [r for r in requests if r.pod == name and r.code == 201]
            assert all(r.node == node for r in ok), (name, node, ok)

        scheduled = Counter(e.involved_object.name for e in self.events("Scheduled"))
        assert all(scheduled[n] <= 1 for n in names), {n: c for n, c in scheduled.items() if c > 1}
        for e in self.events("Scheduled"):
            if e.involved_object.name in bound:
                assert e.message.endswith(f" to {bound[e.involved_object.name]}"), e.message
        conflicts = [
            e.message
            for e in self.events("FailedScheduling")
            if "already assigned" in e.message or "Operation cannot be fulfilled" in e.message
        ]
        assert not conflicts, f"a 409 on binding reached users: {conflicts[:3]}"

        for running in ops:
            self.check_cache(running, timeout=timeout)
            self.check_no_secret_in_log(running)
        return figures

    def expected_per_node(self) -> dict[str, tuple[int, int, set[str]]]:
        """Node -> (cpu millicores, memory bytes, pod keys) of this namespace's bound pods, as the API server says."""
        out: dict[str, tuple[int, int, set[str]]] = {name: (0, 0, set()) for name in self.group.names}
        for pod in self.core.list_namespaced_pod(self.namespace, _request_timeout=CALL_TIMEOUT).items:
            node = pod.spec.node_name
            if not node or pod.status.phase in ("Succeeded", "Failed"):
                continue
            cpu, memory, keys = out.get(node, (0, 0, set()))
            for c in pod.spec.containers:
                req = (c.resources.requests or {}) if c.resources else {}
                cpu += to_milli(req.get("cpu", 0))
                memory += to_units(req.get("memory", 0))
            out[node] = (cpu, memory, keys | {f"{self.namespace}/{pod.metadata.name}"})
        return out

    def check_cache(self, op: Operator, *, timeout: float = 30.0) -> None:
        """The operator's cache per node equals the API server's view (it may take a watch event or two)."""
        last: list[str] = []

        def same() -> bool:
            expected = self.expected_per_node()
            dump = {entry["node"]: entry for entry in op.dump_cache()["node"]}
            last.clear()
            for node, (cpu, memory, keys) in expected.items():
                entry = dump.get(node)
                if entry is None:
                    if keys:
                        last.append(f"{node}: not in the cache, the API server has {sorted(keys)}")
                    continue
                ours = {k for k in entry["pods"] if k.startswith(self.namespace + "/")}
                got = (entry["requested"].get("cpu", 0), entry["requested"].get("memory", 0), ours)
                if got != (cpu, memory, keys) or entry["assumed"]:
                    last.append(
                        f"{node}: cache {got[:2]} only in the cache {sorted(ours - keys)} assumed {entry['assumed']}, "
                        f"API server {(cpu, memory)} only in the API server {sorted(keys - ours)}"
                    )
            return not last

        try:
            wait(op, same, timeout=timeout, message="the cache matches the API server")
        except AssertionError as exc:
            # the differences first: CI keeps the head of a long message, and the log tail follows
            raise AssertionError("differences: " + "; ".join(last[:5]) + f"\n{exc}") from None

    def check_no_secret_in_log(self, op: Operator) -> None:
        """Neither the bearer token nor the client key of the operator's kubeconfig is in its log."""
        secrets = secrets_of(self.kubeconfigs[op])
        text = op.text()
        for secret in secrets:
            assert secret not in text, f"a credential of {self.kubeconfigs[op]} is in {op.log}"

    # ---- tearing down

    def print_logs(self, request: pytest.FixtureRequest) -> None:
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        for op in self.operators:
            text = f"\n--- operator log tail ({op.log}) ---\n{op.tail(80)}\n"
            if reporter is not None:
                reporter.write_line(text)
            else:
                print(text, file=sys.stderr)

    def close(self) -> None:
        for producer in self.producers:
            producer.stopped.set()
        for pause in self.pauses:
            if pause.resumed is None and pause.op.proc.poll() is None:
                os.kill(pause.op.proc.pid, signal.SIGCONT)  # a stopped process would sit on its SIGTERM
        for op in self.operators:
            op.stop()
        for name in self.policies:
            delete_policy(self.custom, name)
        self.group.cleanup()
