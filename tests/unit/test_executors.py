"""One cycle, two executors: the operator (on the fake API server) and ``simulate`` give the same outcomes.

The core (``core/scheduling/cycle.py``) decides every step; ``kube/loop.py`` + ``kube/binding.py`` and
``sim/simulator.py`` only carry the outcomes out. Each scenario here runs through both:

- the operator: an ``App`` with its informers and one scheduling loop on ``tests/fakeapi.py``, its
  unassigned pods relayed as Kopf's watch would (``handlers.on_pod_event``), and a kubelet that
  finishes the deletion of evicted pods. Pods are created step by step, each step once the
  previous one settled (nothing ready, backing off, being bound or written). The App's clock
  (``tests/clocks.py``) moves on by itself only while the operator is idle, to the end of a backoff or a
  Permit deadline, as ``simulate``'s does: no test waits for real time to pass;
- ``simulate``: ``Simulation.run`` over the same bodies, loaded as ``kopf-scheduler simulate``
  loads its files.

What both must agree on: where each pod is bound (or not, and the message it reads last), which
node preemption nominated and which pods it evicted, what reached pods/binding (with the Binding's
annotations), and in what order the plugins' Reserve, Unreserve and PreBind ran. Scenarios avoid
score ties, so the operator's unseeded tie-break and the simulation's seeded one cannot differ.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest
from builders import make_node, make_pod
from clocks import MovingClock
from fakeapi import FakeApiServer

from kopf_scheduler.core.config.ownership import PolicyMeta
from kopf_scheduler.core.config.policy import validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.config.registry import Registry
from kopf_scheduler.core.dra.objects import FINALIZER
from kopf_scheduler.core.model.objects import Pod
from kopf_scheduler.edge.client import Api
from kopf_scheduler.edge.credentials import Credentials
from kopf_scheduler.framework import (
    SKIP,
    SUCCESS,
    ApiClient,
    BindPlugin,
    Code,
    CycleState,
    PermitHandle,
    PermitPlugin,
    PermitResult,
    PreBindPlugin,
    ReservePlugin,
    Status,
    binding_body,
    binding_path,
    error,
)
from kopf_scheduler.kube import app as app_module
from kopf_scheduler.kube import handlers, loop
from kopf_scheduler.kube.app import App
from kopf_scheduler.sim.loader import load_cluster, load_pods
from kopf_scheduler.sim.simulator import Simulation

SCHEDULER = "shared"
RESOURCE_API = ("resource.k8s.io", "v1")
POLICY = "shared"
COSCHEDULING = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")
WORKLOAD = ("scheduling.k8s.io", "v1beta1", "podgroups")
BASE_SPEC: Mapping[str, Any] = {
    "schedulerName": SCHEDULER,
    "podInitialBackoffSeconds": 0.1,
    "podMaxBackoffSeconds": 0.2,
}


# --------------------------------------------------------------------------- plugins both executors load


class Recorder(ReservePlugin, PreBindPlugin):
    """Logs Reserve, Unreserve and PreBind; PreBind fails the first try of a pod labelled ``flaky``
    (a volume not attached yet) and every try of one labelled ``broken``."""

    NAME = "Recorder"
    log: ClassVar[list[str]] = []

    def reserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> Status:
        self.log.append(f"reserve {pod.name} {node_name}")
        return SUCCESS

    def unreserve(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> None:
        self.log.append(f"unreserve {pod.name} {node_name}")

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str, client: ApiClient) -> Status:
        if "broken" in pod.labels or ("flaky" in pod.labels and f"pre_bind {pod.name} failed" not in self.log):
            self.log.append(f"pre_bind {pod.name} failed")
            return error("volume not attached yet")
        self.log.append(f"pre_bind {pod.name}")
        return SUCCESS


class LabelBinder(BindPlugin):
    """Binds the pods labelled ``binder: plugin`` itself (the Binding says so in an annotation); SKIPs the rest."""

    NAME = "LabelBinder"

    async def bind(self, state: CycleState, pod: Pod, node_name: str, client: ApiClient) -> Status:
        if pod.labels.get("binder") != "plugin":
            return SKIP
        body = binding_body(pod, node_name, annotations={"example.com/bound-by": self.name})
        response = await client.request("POST", binding_path(pod), body)
        return SUCCESS if response.ok else error(response.detail())


class Hold(PermitPlugin):
    """Makes pods labelled ``hold`` wait at Permit for half a second (nobody allows them: they time out)."""

    NAME = "Hold"

    def permit(self, state: CycleState, pod: Pod, node_name: str, handle: PermitHandle) -> PermitResult:
        if "hold" not in pod.labels:
            return PermitResult()
        return PermitResult(Status(Code.WAIT, ("held",)), timeout=0.5)


REGISTRY = Registry.in_tree().extended([(Recorder, "test"), (LabelBinder, "test"), (Hold, "test")])
PLUGINS_SPEC: Mapping[str, Any] = {**BASE_SPEC, "plugins": [{"name": "Recorder"}, {"name": "LabelBinder"}]}


@pytest.fixture(autouse=True)
def fresh_log() -> Iterator[None]:
    Recorder.log.clear()
    yield
    Recorder.log.clear()


# --------------------------------------------------------------------------- scenarios


def node(name: str, cpu: str) -> dict[str, Any]:
    return make_node(name).capacity(cpu=cpu, memory="32Gi", pods="110").raw()


def pod(name: str, cpu: str = "1", *, priority: int = 0, **labels: str) -> dict[str, Any]:
    builder = make_pod(name).scheduler(SCHEDULER).req(cpu=cpu, memory="1Gi").priority(priority)
    return builder.labels(labels).raw() if labels else builder.raw()


def running(name: str, node_name: str, cpu: str, *, priority: int) -> dict[str, Any]:
    return (
        make_pod(name).scheduler("someone-else").req(cpu=cpu).priority(priority).node(node_name).phase("Running").raw()
    )


def member(name: str, group: str, cpu: str = "1") -> dict[str, Any]:
    return make_pod(name).scheduler(SCHEDULER).req(cpu=cpu, memory="1Gi").pod_group(group).raw()


def pod_group(name: str, size: int, *, timeout: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": size, "scheduleTimeoutSeconds": timeout},
    }


def workload_member(name: str, group: str, cpu: str = "1", *, priority: int = 0) -> dict[str, Any]:
    builder = make_pod(name).scheduler(SCHEDULER).req(cpu=cpu, memory="1Gi").scheduling_group(group)
    return builder.priority(priority).raw()


def workload_group(name: str, size: int, *, priority: int | None = None, disruption: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": size}}}
    if priority is not None:
        spec["priority"] = priority
    if disruption:
        spec["disruptionMode"] = {disruption: {}}
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": f"pg-{name}"},
        "spec": spec,
    }


def workload_running(name: str, group: str, node_name: str, *, priority: int) -> dict[str, Any]:
    """A member of `group` another scheduler bound, holding 1 cpu."""
    builder = make_pod(name).scheduler("someone-else").req(cpu="1").priority(priority).scheduling_group(group)
    return builder.node(node_name).phase("Running").raw()


@dataclass
class Scenario:
    nodes: list[dict[str, Any]]
    #: pods created together per step, each step once the previous one settled
    steps: list[list[dict[str, Any]]]
    bound: list[dict[str, Any]] = field(default_factory=list)
    groups: list[dict[str, Any]] = field(default_factory=list)
    spec: Mapping[str, Any] = field(default_factory=lambda: BASE_SPEC)
    #: resource.k8s.io/v1 objects (DynamicResources): (plural, body)
    dra: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


@dataclass
class Observed:
    """What an executor did, in terms both can tell."""

    #: pod -> its node, or None
    nodes: dict[str, str | None] = field(default_factory=dict)
    #: pod -> the last failure it reads ("" when bound)
    messages: dict[str, str] = field(default_factory=dict)
    #: pod -> the nodes its ``status.nominatedNodeName`` was set to: by preemption, or before binding (it waited
    #: at Permit, or a PreBind plugin had work: upstream's NominatedNodeNameForExpectation)
    nominated: dict[str, set[str]] = field(default_factory=dict)
    #: preemptor -> the pods it evicted
    victims: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: successful pods/binding requests: (pod, node, the Binding's annotations)
    bindings: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    #: Recorder's log
    log: list[str] = field(default_factory=list)
    #: simulate only: pod -> the text of each attempt that did not place it (``Placement.failures``)
    failures: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def outcome(self) -> tuple[object, ...]:
        return (self.nodes, self.messages, self.nominated, self.victims, sorted(map(str, self.bindings)), self.log)


# --------------------------------------------------------------------------- the simulate executor


def simulate(s: Scenario) -> tuple[Observed, Simulation]:
    loaded = load_cluster([*s.nodes, *s.bound, *s.groups, *(body for _, body in s.dra)], source="scenario")
    profile = validate_policy(s.spec, registry=REGISTRY)
    assert isinstance(profile, Profile), profile
    pods = load_pods([body for step in s.steps for body in step], source="scenario")
    sim = Simulation(loaded.cache, profile, seed=3)
    result = sim.run(pods)
    seen = Observed(log=list(Recorder.log))
    for p in result.placements:
        name = p.pod.split("/")[1]
        seen.nodes[name], seen.messages[name], seen.failures[name] = p.node, p.message, p.failures
        if p.nominated_node or p.nominated_before_binding:
            seen.nominated[name] = {p.nominated_node, p.nominated_before_binding} - {""}
        if p.victims:
            seen.victims[name] = tuple(v.split("/")[1] for v in p.victims)
    for method, path, body in sim.api.requests:
        if method == "POST" and path.endswith("/binding"):
            annotations = dict(body["metadata"].get("annotations") or {})
            seen.bindings.append((path.split("/")[-2], body["target"]["name"], annotations))
    return seen, sim


# --------------------------------------------------------------------------- the operator executor


class Flag:
    """Kopf's ``stopped`` flag."""

    def __init__(self) -> None:
        self.set = False

    def __bool__(self) -> bool:
        return self.set


#: seconds of real time the operator must stay idle before a step counts as settled, and between looks
QUIET = 0.006
POLL = 0.001


class Operator:
    """One scheduler process on the fake API server, with Kopf's pod watch and a kubelet played by tasks."""

    def __init__(self, server: FakeApiServer, spec: Mapping[str, Any]) -> None:
        self.server = server
        self.api = Api(
            Credentials(server=server.url, source="fakeapi"), timeout=2.0, fence=lambda: True, user_agent="t"
        )
        #: moved on only while the operator is idle, to the next moment something is due (a backoff's end, a
        #: Permit deadline), as ``simulate``'s clock jumps from event to event
        self.clock = MovingClock()
        self.app = App(self.api, identity="t", clock=self.clock)
        meta = PolicyMeta(POLICY, 1, "2026-01-01T00:00:00Z", "uid-policy", SCHEDULER, spec)
        statuses = self.app.observe_policy(meta)
        assert statuses[POLICY]["conditions"][0]["status"] == "True", statuses
        self.stopped = Flag()
        self.tasks: list[asyncio.Task[None]] = []
        self._relayed: dict[str, tuple[str, dict[str, Any]]] = {}
        #: the App's tasks that run for good (informers, watchdog); any other is a write or a bind in flight
        self._resident: set[asyncio.Task[Any]] = set()
        #: set by every change the server stores: the relay and the kubelet look again then
        self._changes = [asyncio.Event(), asyncio.Event()]
        stored = server.store.changed

        def changed(change: Any) -> None:
            if stored is not None:
                stored(change)
            for event in self._changes:
                event.set()

        server.store.changed = changed

    async def start(self) -> None:
        handlers.start_informers(self.app)
        self._resident = set(self.app._tasks)
        await self.wait(self.app.current)
        self.tasks = [
            asyncio.create_task(loop.run(self.app, POLICY, self.stopped)),
            asyncio.create_task(self._forever(self._relay, self._changes[0])),
            asyncio.create_task(self._forever(self._kubelet, self._changes[1])),
        ]

    async def stop(self) -> None:
        self.stopped.set = True
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for hook in self.app.on_shutdown:
            await hook()
        leftovers = list(self.app._tasks)
        for task in leftovers:
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)
        await self.api.close()

    @staticmethod
    async def _forever(step: Callable[[], Any], changes: asyncio.Event) -> None:
        while True:
            changes.clear()
            await step()
            await changes.wait()

    async def _relay(self) -> None:
        """Kopf's watch of unassigned pods: ADDED / MODIFIED while unbound, DELETED once bound or gone."""
        now = {b["metadata"]["uid"]: b for b in self.server.objects("", "v1", "pods") if not b["spec"].get("nodeName")}
        for uid, (_, last) in list(self._relayed.items()):
            if uid not in now:
                del self._relayed[uid]
                await handlers.on_pod_event({"type": "DELETED", "object": last}, memo={"app": self.app})
        for uid, body in now.items():
            rv = body["metadata"]["resourceVersion"]
            if self._relayed.get(uid, ("",))[0] != rv:
                kind = "MODIFIED" if uid in self._relayed else "ADDED"
                self._relayed[uid] = (rv, body)
                await handlers.on_pod_event({"type": kind, "object": body}, memo={"app": self.app})

    async def _kubelet(self) -> None:
        """A bound pod being deleted is gone once its containers stopped (at once, here)."""
        for body in self.server.objects("", "v1", "pods"):
            if body["metadata"].get("deletionTimestamp"):
                self.server.delete("", "v1", "pods", body["metadata"]["name"])

    def busy(self) -> bool:
        """A pod is ready, in flight but not at Permit (being bound), dying, or its last change not relayed
        yet; a write (an event, a status patch) is in flight; or the informers have not caught up."""
        queue = self.app.states[SCHEDULER].queue
        waiting = {w.pod.uid for w in self.app.waiting}
        pods = self.server.objects("", "v1", "pods")
        binding = any(
            queue.where(b["metadata"]["uid"]) == "in_flight" and b["metadata"]["uid"] not in waiting for b in pods
        )
        unbound = {b["metadata"]["uid"]: b for b in pods if not b["spec"].get("nodeName")}
        relayed = {uid: b["metadata"]["resourceVersion"] for uid, b in unbound.items()} == {
            uid: rv for uid, (rv, _) in self._relayed.items()
        }
        dying = any(b["metadata"].get("deletionTimestamp") for b in pods)
        writing = any(not task.done() for task in self.app._tasks - self._resident)
        # the pods informer has caught up: the cache holds exactly the server's bound pods (a deletion or a
        # bind it has not delivered yet shows here), besides those assumed at Permit
        cached = {p.uid for p in self.app.cache.pods()} - waiting
        unseen = cached != {b["metadata"]["uid"] for b in pods if b["spec"].get("nodeName")}
        return bool(queue.pending_counts()["active"]) or binding or dying or not relayed or writing or unseen

    def _due(self) -> float | None:
        """When the next pod backing off is ready (by the operator's clock), if one is."""
        queue = self.app.states[SCHEDULER].queue
        return queue.next_ready_at(self.clock()) if queue.pending_counts()["backoff"] else None

    async def idle(self, *, timeout: float = 6.0) -> None:
        """Until the operator was not busy for `QUIET` seconds (that covers what follows a step on the wire:
        a watch event on its way to an informer)."""
        deadline = time.monotonic() + timeout
        calm_since, looks = time.monotonic(), 0
        while looks < 3 or time.monotonic() - calm_since < QUIET:
            assert time.monotonic() < deadline, "the operator did not settle"
            await asyncio.sleep(POLL)
            if self.busy():
                calm_since, looks = time.monotonic(), 0
            else:
                looks += 1

    async def settle(self, *, timeout: float = 6.0) -> None:
        """Until nothing is ready, backing off, being bound, written, dying or unseen by the informers: each
        time the operator is idle with a pod backing off, the clock moves on to its backoff's end."""
        deadline = time.monotonic() + timeout
        while await self.pass_time(timeout=deadline - time.monotonic()):
            pass

    async def pass_time(self, *, timeout: float = 6.0) -> bool:
        """Once the operator is idle, move the clock on to the end of the next backoff; False if none."""
        await self.idle(timeout=timeout)
        due = self._due()
        if due is None:
            return False
        self.clock.advance(due - self.clock())
        self.app.wake()
        return True

    async def expire_waiting(self, *, timeout: float = 6.0) -> None:
        """Until no pod waits at Permit: each time the operator is idle, the clock moves on to the next
        waiting pod's deadline (gangs and held pods wait out their timeout)."""
        deadline = time.monotonic() + timeout
        while (due := self.app.waiting.next_deadline()) is not None:
            assert time.monotonic() < deadline, "pods still wait at Permit"
            self.clock.advance(due - self.clock())
            self.app.wake()
            await self.settle(timeout=deadline - time.monotonic())

    async def wait(self, condition: Callable[[], object], timeout: float = 6.0) -> None:
        deadline = time.monotonic() + timeout
        while not condition():
            assert time.monotonic() < deadline, "timed out"
            await asyncio.sleep(POLL)

    def observed(self, names: list[str]) -> Observed:
        seen = Observed(log=list(Recorder.log))
        requests = self.server.requests
        uids: dict[str, str] = {}
        for name in names:
            body = self.server.get("", "v1", "pods", name)
            assert body is not None, name
            uids[body["metadata"]["uid"]] = name
            seen.nodes[name] = body["spec"].get("nodeName") or None
            failures = [
                r.body["message"]
                for r in requests
                if r.method == "POST" and r.path.endswith("/events") and r.body["reason"] == "FailedScheduling"
                and r.body["involvedObject"]["name"] == name
            ]  # fmt: skip
            seen.messages[name] = "" if seen.nodes[name] else (failures[-1] if failures else "")
        for r in requests:
            if r.method == "PATCH" and r.path.endswith("/status") and r.path.split("/")[-2] in names:
                nominated = (r.body.get("status") or {}).get("nominatedNodeName")
                if nominated:
                    seen.nominated.setdefault(r.path.split("/")[-2], set()).add(nominated)
        for r in requests:
            if r.method == "POST" and r.path.endswith("/events") and r.body["reason"] == "Preempted":
                # "Preempted by pod <uid> on node <node>", or "... by podgroup <uid> on node cluster" for a gang,
                # whose members that preemption nominated report the victim
                kind, uid = r.body["message"].split()[2:4]
                for preemptor in [uids[uid]] if kind == "pod" else self._nominated_members(uid, seen):
                    seen.victims[preemptor] = (*seen.victims.get(preemptor, ()), r.body["involvedObject"]["name"])
        for r in requests:
            if r.method == "POST" and r.path.endswith("/binding") and 200 <= r.status < 300:
                annotations = dict(r.body["metadata"].get("annotations") or {})
                seen.bindings.append((r.path.split("/")[-2], r.body["target"]["name"], annotations))
        return seen

    def _nominated_members(self, group_uid: str, seen: Observed) -> list[str]:
        """The pods of the Workload PodGroup `group_uid` whose nomination was written."""
        [group] = [g for g in self.server.objects(*WORKLOAD) if g["metadata"]["uid"] == group_uid]
        return [
            name
            for name in seen.nominated
            if ((self.server.get("", "v1", "pods", name) or {}).get("spec", {}).get("schedulingGroup") or {}).get(
                "podGroupName"
            )
            == group["metadata"]["name"]
        ]


def operate(
    s: Scenario, monkeypatch: pytest.MonkeyPatch, *, on_server: Callable[[FakeApiServer], None] | None = None
) -> Observed:
    monkeypatch.setattr(app_module, "installed_registry", lambda: REGISTRY)
    names = [body["metadata"]["name"] for step in s.steps for body in step]

    async def main() -> Observed:
        async with FakeApiServer() as server:
            if s.groups:
                server.register(*COSCHEDULING, "PodGroup")
                server.register(*WORKLOAD, "PodGroup")
            for group in s.groups:
                server.add(*(WORKLOAD if group["apiVersion"].startswith("scheduling.k8s.io/") else COSCHEDULING), group)
            for plural, body in s.dra:
                server.add(*RESOURCE_API, plural, body)
            for body in s.nodes:
                server.add("", "v1", "nodes", body)
            for body in s.bound:
                server.add("", "v1", "pods", body)
            op = Operator(server, s.spec)
            try:
                await op.start()
                for step in s.steps:
                    for body in step:
                        server.add("", "v1", "pods", body)
                    await op.settle()
                await op.expire_waiting()  # gangs and held pods: their timeout passes
                if on_server is not None:
                    on_server(server)
                return op.observed(names)
            finally:
                await op.stop()

    return asyncio.run(asyncio.wait_for(main(), 30))


# --------------------------------------------------------------------------- the shared scenarios


PLAIN = Scenario(
    nodes=[node("big", "8"), node("small", "2")],
    # least allocated: big keeps more room free than small for a, b and c; huge fits no node
    steps=[[pod("a")], [pod("b")], [pod("c", cpu="2")], [pod("huge", cpu="16")]],
)
PREEMPTION = Scenario(
    nodes=[node("n1", "2"), node("n2", "2")],
    bound=[running("batch", "n1", "2", priority=0), running("system", "n2", "2", priority=1000)],
    # patient (priority 0) finds nothing to evict; urgent (100) evicts batch, is nominated to n1, then bound there;
    # batch's deletion moves patient too, which still does not fit: urgent holds n1 by its nomination
    steps=[[pod("patient", cpu="1")], [pod("urgent", cpu="2", priority=100)]],
)


def claimed(name: str, claim: str) -> dict[str, Any]:
    body = pod(name)
    body["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    return body


def dra_objects() -> list[tuple[str, dict[str, Any]]]:
    """A class of gpu.example.com devices, one such device on n2, and two claims for one each."""
    api = "resource.k8s.io/v1"
    requests = [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]
    return [
        ("deviceclasses", {"apiVersion": api, "kind": "DeviceClass", "metadata": {"name": "gpu"},
                           "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}}),
        ("resourceslices", {"apiVersion": api, "kind": "ResourceSlice", "metadata": {"name": "n2-gpus"},
                            "spec": {"driver": "gpu.example.com", "nodeName": "n2", "devices": [{"name": "gpu-0"}],
                                     "pool": {"name": "n2", "generation": 1, "resourceSliceCount": 1}}}),
        *(("resourceclaims", {"apiVersion": api, "kind": "ResourceClaim",
                              "metadata": {"name": c, "namespace": "default"},
                              "spec": {"devices": {"requests": requests}}})
          for c in ("c1", "c2")),
    ]  # fmt: skip


#: gpu-1 can only go to n2 (the slice's node), though n1 has more room; gpu-2 finds the device taken
DRA = Scenario(
    nodes=[node("n1", "8"), node("n2", "2")],
    dra=dra_objects(),
    steps=[[claimed("gpu-1", "c1")], [claimed("gpu-2", "c2")], [pod("plain")]],
)
GANG_FITS = Scenario(
    nodes=[node("n1", "3"), node("n2", "2"), node("n3", "1")],  # of different sizes: no score ties
    groups=[pod_group("train", 3, timeout=30)],  # a slow machine must not make it wait out its timeout
    steps=[[member("train-0", "train"), member("train-1", "train"), member("train-2", "train")]],
)
GANG_DOES_NOT_FIT = Scenario(
    nodes=[node("n1", "1"), node("n2", "1")],
    groups=[pod_group("etl", 3, timeout=1)],
    steps=[[member("etl-0", "etl"), member("etl-1", "etl"), member("etl-2", "etl")]],
)
#: the same gang where a missing third (33%) is within podGroupRejectPercentage: PostFilter leaves it, the
#: two that fit wait out their timeout (which member fails depends on the order the watch brings them in,
#: so the PostFilter case, whose texts name that member, is compared on a gang where none fits)
GANG_WAITS_OUT = dataclasses.replace(
    GANG_DOES_NOT_FIT,
    # nodes of different sizes: the first member tried waits on n2, the second on n1 (no tie between the executors)
    nodes=[node("n1", "1"), node("n2", "1500m")],
    spec={**BASE_SPEC, "gangScheduling": {"podGroupRejectPercentage": 50}},
)
GANG_FITS_NOWHERE = Scenario(
    nodes=[node("n1", "1"), node("n2", "1")],
    groups=[pod_group("big", 2, timeout=1)],
    steps=[[member("big-0", "big", cpu="2"), member("big-1", "big", cpu="2")]],
)

WORKLOAD_GANG_FITS = Scenario(
    nodes=[node("n1", "3"), node("n2", "2"), node("n3", "1")],  # the members' order decides who goes where
    groups=[workload_group("train", 3)],
    steps=[[workload_member(f"train-{i}", "train") for i in range(3)]],
)
#: the issue's small case: a gang of 4 pods of 2 cpu where 3 fit (big takes 2, small 1), then a lone pod
WORKLOAD_GANG_DOOMED = Scenario(
    nodes=[node("big", "4"), node("small", "2")],
    groups=[workload_group("train", 4)],
    steps=[[workload_member(f"train-{i}", "train", cpu="2") for i in range(4)], [pod("lone")]],
)


#: upstream's WorkloadAwarePreemption: a low-priority gang disrupted together holds n1, a high-priority pod holds
#: n2; the gang "train" (priority 100) of two finds no room, and its preemption evicts the whole "batch" gang
WORKLOAD_GANG_PREEMPTS = Scenario(
    nodes=[node("n1", "2"), node("n2", "2")],
    groups=[
        workload_group("batch", 2, priority=0, disruption="all"),
        workload_group("train", 2, priority=100),
    ],
    bound=[
        workload_running("batch-0", "batch", "n1", priority=0),
        workload_running("batch-1", "batch", "n1", priority=0),
        running("system", "n2", "2", priority=1000),
    ],
    steps=[[workload_member(f"train-{i}", "train", priority=100) for i in range(2)]],
)


@pytest.mark.parametrize(
    "scenario",
    [
        pytest.param(PLAIN, id="plain placement"),
        pytest.param(PREEMPTION, id="preemption: victims evicted, the preemptor nominated then bound"),
        pytest.param(GANG_FITS, id="a gang that fits"),
        pytest.param(GANG_WAITS_OUT, id="a gang that does not fit, within the reject percentage: released at timeout"),
        pytest.param(GANG_FITS_NOWHERE, id="a coscheduling gang that fits nowhere: PostFilter turns it down"),
        pytest.param(WORKLOAD_GANG_FITS, id="a Workload-API gang that fits: one pod-group cycle"),
        pytest.param(WORKLOAD_GANG_DOOMED, id="a doomed Workload-API gang holds nothing; a lone pod takes big"),
        pytest.param(WORKLOAD_GANG_PREEMPTS, id="a Workload-API gang preempts a gang disrupted together, whole"),
        pytest.param(DRA, id="DynamicResources: a claim allocated on the slice's node, the next one refused"),
    ],
)
def test_both_executors_agree(scenario: Scenario, monkeypatch: pytest.MonkeyPatch) -> None:
    simulated, _ = simulate(scenario)
    operated = operate(scenario, monkeypatch)
    assert operated.outcome() == simulated.outcome()


def test_plain_placements() -> None:
    seen, _ = simulate(PLAIN)
    assert seen.nodes == {"a": "big", "b": "big", "c": "big", "huge": None}
    assert seen.messages["huge"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert [(p, n) for p, n, _ in seen.bindings] == [("a", "big"), ("b", "big"), ("c", "big")]


def test_preemption_evicts_nominates_then_binds() -> None:
    seen, sim = simulate(PREEMPTION)
    assert seen.nodes == {"patient": None, "urgent": "n1"}
    # nominated by its preemption, and bound there: no second nomination before binding (it carries n1)
    assert (seen.nominated, seen.victims) == ({"urgent": {"n1"}}, {"urgent": ("batch",)})
    assert seen.messages["patient"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert sorted(p.name for p in sim.cache.pods()) == ["system", "urgent"]  # batch is gone


def test_a_gang_that_fits_is_bound_whole() -> None:
    seen, _ = simulate(GANG_FITS)
    # least allocated: train-0 on n1 (2/3 free), train-1 on n2 (1/2 free beats n1's 1/3), train-2 on n1 (1/3 beats 0)
    assert seen.nodes == {"train-0": "n1", "train-1": "n2", "train-2": "n1"}
    # the last member's Permit completes the gang: it is bound at once, then the members that waited for it
    assert [p for p, _, _ in seen.bindings] == ["train-2", "train-0", "train-1"]


def test_a_gang_that_does_not_fit_is_turned_down_by_post_filter_and_releases_every_reservation() -> None:
    seen, sim = simulate(GANG_DOES_NOT_FIT)
    assert seen.nodes == {"etl-0": None, "etl-1": None, "etl-2": None} and seen.bindings == []
    assert seen.messages["etl-0"] == seen.messages["etl-1"] == "optimistic rejection in PostFilter"
    assert seen.messages["etl-2"].endswith(
        "PodGroup default/etl gets rejected due to Pod etl-2 is unschedulable even after PostFilter"
    )
    assert list(sim.cache.pods()) == [] and sim.cache.assumed_count() == 0
    assert sim.clock < 1  # at once: nobody waited for the 1 s timeout


def test_a_gang_within_the_reject_percentage_waits_out_its_timeout() -> None:
    seen, sim = simulate(GANG_WAITS_OUT)
    gang = "gang default/etl: only 2 of the 3 pods it needs fit; none is bound and every reservation is released"
    assert sorted(seen.messages.values())[1:] == [gang, gang]
    assert list(sim.cache.pods()) == [] and sim.cache.assumed_count() == 0


def test_a_gang_member_waiting_at_permit_is_preempted_in_memory_and_backs_off() -> None:
    """Upstream's executor preempts a victim that waits at Permit without deleting it (``waitingPod.Preempt``): its
    wait ends in an error, it backs off and is tried again. Here the member waiting on n2 (the only node where
    urgent fits once it is gone) is that victim: urgent lands on n2, the member is still there, unbound."""
    scenario = dataclasses.replace(
        GANG_WAITS_OUT,
        groups=[pod_group("etl", 3, timeout=30)],
        steps=[*GANG_WAITS_OUT.steps, [pod("urgent", cpu="1500m", priority=100)]],
    )
    seen, sim = simulate(scenario)
    assert seen.nodes["urgent"] == "n2" and seen.victims == {"urgent": (seen.victims["urgent"][0],)}
    [victim] = seen.victims["urgent"]
    assert seen.nodes[victim] is None  # not bound...
    assert sim.api.answer("GET", f"/api/v1/namespaces/default/pods/{victim}").ok  # ...and not deleted


#: a pod waiting at Permit (Hold) on n2, the only node where urgent fits once it is gone: preempted in memory
HELD_PREEMPTED = Scenario(
    nodes=[node("n1", "1"), node("n2", "1500m")],
    steps=[[pod("held", hold="yes")], [pod("urgent", cpu="1500m", priority=100)]],
    spec={**BASE_SPEC, "plugins": [{"name": "Hold"}]},
)


def test_the_operator_preempts_a_waiting_pod_in_memory_too(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = HELD_PREEMPTED
    deletes: list[str] = []
    operated = operate(
        scenario,
        monkeypatch,
        on_server=lambda server: deletes.extend(r.path for r in server.requests if r.method == "DELETE"),
    )
    assert operated.nodes["urgent"] == "n2" and operated.victims == {"urgent": ("held",)}
    assert deletes == []  # the victim was not deleted
    simulated, _ = simulate(scenario)
    assert (operated.nodes, operated.victims) == (simulated.nodes, simulated.victims)


def test_dra_claims_are_allocated_and_reserved() -> None:
    seen, sim = simulate(DRA)
    assert seen.nodes == {"gpu-1": "n2", "gpu-2": None, "plain": "n1"}
    assert seen.messages["gpu-2"] == (
        "0/2 nodes are available: 2 cannot allocate all claims. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )
    claim = sim.cache.objects.dra.get_claim("default", "c1")
    assert claim is not None and claim.allocation is not None
    assert [(r.pool, r.device) for r in claim.allocation.results] == [("n2", "gpu-0")]
    assert [r.name for r in claim.reserved_for] == ["gpu-1"] and FINALIZER in claim.finalizers
    # DynamicResources' PreBind has work for a pod with claims: nominated to n2 before it was bound there, and the
    # bind cleared it (ClearingNominatedNodeNameAfterBinding); the pod without claims was not nominated
    assert seen.nominated == {"gpu-1": {"n2"}}
    body = sim.api.answer("GET", "/api/v1/namespaces/default/pods/gpu-1").body
    assert body["spec"]["nodeName"] == "n2" and "nominatedNodeName" not in body.get("status", {})


def test_the_operator_nominates_before_pre_bind_and_the_bind_clears_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's order of writes for a pod whose PreBind has work: nominatedNodeName, the claim, the bind."""
    writes: list[tuple[str, list[str], Any]] = []

    def record(server: FakeApiServer) -> None:
        for r in server.requests:
            if r.method != "GET" and ("/pods/gpu-1/" in r.path or "/resourceclaims/c1" in r.path):
                writes.append((r.method, r.path.split("/")[-2:], r.body))

    operate(DRA, monkeypatch, on_server=record)
    method, path, body = writes[0]
    assert (method, path, body["status"]["nominatedNodeName"]) == ("PATCH", ["gpu-1", "status"], "n2")
    assert writes[-1][:2] == ("POST", ["gpu-1", "binding"])
    assert any(p == ["c1", "status"] for _, p, _ in writes[1:-1])  # PreBind's claim write in between


def test_a_gang_that_fits_nowhere_reads_post_filter_on_every_member() -> None:
    seen, _ = simulate(GANG_FITS_NOWHERE)
    for name in ("big-0", "big-1"):
        assert seen.messages[name].endswith(
            f"PodGroup default/big gets rejected due to Pod {name} is unschedulable even after PostFilter"
        )


def test_a_workload_gang_that_fits_is_bound_in_one_pod_group_cycle() -> None:
    seen, sim = simulate(WORKLOAD_GANG_FITS)
    assert set(seen.nodes.values()) <= {"n1", "n2", "n3"} and None not in seen.nodes.values()
    # members tried in order, each seeing the others' room, then submitted in that order as upstream does: the
    # first two wait at Permit (nominated to their nodes meanwhile), the third completes the gang and is bound
    # first, then the two it allowed
    assert [p for p, _, _ in seen.bindings] == ["train-2", "train-0", "train-1"]
    assert seen.nominated == {name: {seen.nodes[name]} for name in ("train-0", "train-1")}
    assert len(sim.waiting) == 0


def test_a_doomed_workload_gang_holds_nothing_and_the_lone_pod_lands_on_big() -> None:
    seen, sim = simulate(WORKLOAD_GANG_DOOMED)
    gang = (
        "pod group is unschedulable, minCount (4) cannot be satisfied: 3 scheduled, 0 remaining, "
        "pod group preemption: No preemption victims found for incoming preemptor"
    )
    assert [seen.messages[f"train-{i}"] for i in range(3)] == [gang, gang, gang]
    assert seen.messages["train-3"].startswith("0/2 nodes are available: 2 Insufficient cpu.")
    assert seen.nodes == {"train-0": None, "train-1": None, "train-2": None, "train-3": None, "lone": "big"}
    assert [p.name for p in sim.cache.pods()] == ["lone"] and sim.cache.assumed_count() == 0


def test_a_workload_gang_preempts_a_whole_gang_then_lands_where_it_was_nominated() -> None:
    seen, sim = simulate(WORKLOAD_GANG_PREEMPTS)
    assert seen.nodes == {"train-0": "n1", "train-1": "n1"}
    assert seen.nominated == {"train-0": {"n1"}, "train-1": {"n1"}}
    assert seen.victims == {"train-0": ("batch-0", "batch-1"), "train-1": ("batch-0", "batch-1")}
    assert sorted(p.name for p in sim.cache.pods()) == ["system", "train-0", "train-1"]
    found = "pod group preemption: found a placement for podgroup, preempting 2 victims"
    assert sim.rejections == {
        "scheduling.k8s.io/default/train": f"minCount (2) cannot be satisfied: 0 scheduled, 1 remaining, {found}"
    }
    # train-0 was tried and fit nowhere (its FitError); train-1, untried, read PlacementFeasible's count
    assert seen.failures == {
        "train-0": ("0/2 nodes are available: 2 Insufficient cpu.",),
        "train-1": ("minCount (2) cannot be satisfied: 0 scheduled, 1 remaining",),
    }


def test_the_operator_evicts_a_gangs_victims_for_its_podgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    """The victims' Preempted events and DisruptionTarget conditions name the PodGroup, as upstream's executor."""
    events: list[dict[str, Any]] = []
    conditions: list[dict[str, Any]] = []
    uids: list[str] = []

    def record(server: FakeApiServer) -> None:
        uids.extend(g["metadata"]["uid"] for g in server.objects(*WORKLOAD) if g["metadata"]["name"] == "train")
        for r in server.requests:
            if r.method == "POST" and r.path.endswith("/events") and r.body["reason"] == "Preempted":
                events.append(r.body)
            if r.method == "PATCH" and r.path.endswith("/status") and "/pods/batch-" in r.path:
                conditions.extend((r.body.get("status") or {}).get("conditions") or [])

    operate(WORKLOAD_GANG_PREEMPTS, monkeypatch, on_server=record)
    assert sorted(e["involvedObject"]["name"] for e in events) == ["batch-0", "batch-1"]
    assert {e["message"] for e in events} == {f"Preempted by podgroup {uids[0]} on node cluster"}
    assert {(e["related"]["kind"], e["related"]["name"], e["related"]["uid"]) for e in events} == {
        ("PodGroup", "train", uids[0])
    }
    assert {c["message"] for c in conditions if c["type"] == "DisruptionTarget"} == {
        f"{SCHEDULER}: preempting to accommodate a higher priority podgroup"
    }


# --------------------------------------------------------------------------- PreBind and Bind, both executors


FLAKY = Scenario(nodes=[node("n1", "4")], steps=[[pod("flaky", flaky="yes")]], spec=PLUGINS_SPEC)
BINDERS = Scenario(nodes=[node("n1", "4")], steps=[[pod("mine", binder="plugin")], [pod("theirs")]], spec=PLUGINS_SPEC)


@pytest.mark.parametrize("executor", ["operator", "simulate"])
def test_a_pre_bind_failure_unreserves_and_requeues(executor: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = operate(FLAKY, monkeypatch) if executor == "operator" else simulate(FLAKY)[0]
    assert seen.log == [
        "reserve flaky n1",
        "pre_bind flaky failed",
        "unreserve flaky n1",  # the binding cycle failed: every Reserve plugin unreserves, the pod is forgotten
        "reserve flaky n1",  # requeued (backoff), tried again
        "pre_bind flaky",
    ]
    assert seen.nodes == {"flaky": "n1"} and [(p, n) for p, n, _ in seen.bindings] == [("flaky", "n1")]


def test_the_operator_reports_a_pre_bind_failure_naming_the_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    broken = Scenario(nodes=[node("n1", "4")], steps=[[pod("broken", broken="yes")]], spec=PLUGINS_SPEC)
    monkeypatch.setattr(app_module, "installed_registry", lambda: REGISTRY)

    async def main() -> list[str]:
        async with FakeApiServer() as server:
            server.add("", "v1", "nodes", broken.nodes[0])
            op = Operator(server, broken.spec)
            try:
                await op.start()
                server.add("", "v1", "pods", broken.steps[0][0])
                await op.wait(lambda: any(line.startswith("pre_bind") for line in Recorder.log))
                assert await op.pass_time()  # its backoff ends: tried again
                await op.wait(lambda: sum(1 for line in Recorder.log if line.startswith("pre_bind")) >= 2)
                return [
                    r.body["message"]
                    for r in server.requests
                    if r.path.endswith("/events") and r.body["reason"] == "FailedScheduling"
                ]
            finally:
                await op.stop()

    messages = asyncio.run(asyncio.wait_for(main(), 20))
    assert messages[0] == "Binding rejected: running PreBind plugin 'Recorder': volume not attached yet"


def test_simulate_gives_up_on_a_pre_bind_that_always_fails() -> None:
    broken = Scenario(nodes=[node("n1", "4")], steps=[[pod("broken", broken="yes")]], spec=PLUGINS_SPEC)
    seen, sim = simulate(broken)
    assert seen.nodes == {"broken": None} and seen.bindings == []
    assert seen.messages["broken"] == "Binding rejected: running PreBind plugin 'Recorder': volume not attached yet"
    assert seen.log.count("pre_bind broken failed") == 3 == seen.log.count("unreserve broken n1")
    assert list(sim.cache.pods()) == []


@pytest.mark.parametrize("executor", ["operator", "simulate"])
def test_a_bind_plugin_binds_or_passes_to_default_binder(executor: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = operate(BINDERS, monkeypatch) if executor == "operator" else simulate(BINDERS)[0]
    assert seen.nodes == {"mine": "n1", "theirs": "n1"}
    # LabelBinder bound `mine` (SUCCESS): DefaultBinder sent nothing for it; it SKIPped `theirs`: DefaultBinder bound it
    assert seen.bindings == [("mine", "n1", {"example.com/bound-by": "LabelBinder"}), ("theirs", "n1", {})]


def test_the_plugins_run_in_the_policy_order_with_default_binder_last() -> None:
    profile = validate_policy(PLUGINS_SPEC, registry=REGISTRY)
    assert isinstance(profile, Profile)
    assert [p.name for p in profile.pre_binders] == ["VolumeBinding", "DynamicResources", "Recorder"]
    assert [p.name for p in profile.binders] == ["LabelBinder", "DefaultBinder"]


def test_evaluate_runs_one_attempt_through_the_cycle_and_takes_it_back() -> None:
    """The differential harness's question: the first decision, as the executors reach it, nothing carried out."""
    loaded = load_cluster([*PREEMPTION.nodes, *PREEMPTION.bound], source="scenario")
    profile = validate_policy(PLUGINS_SPEC, registry=REGISTRY)
    assert isinstance(profile, Profile)
    sim = Simulation(loaded.cache, profile)
    (urgent,) = load_pods([pod("urgent", cpu="2", priority=100)])
    (small,) = load_pods([pod("small", cpu="0")])
    assert isinstance(urgent, Pod) and isinstance(small, Pod)
    placement = sim.evaluate(urgent)
    assert (placement.node, placement.nominated_node, placement.victims) == (None, "n1", ("default/batch",))
    assert sorted(p.name for p in sim.cache.pods()) == ["batch", "system"]  # no eviction
    assert sim.evaluate(small).node in ("n1", "n2")
    assert sim.cache.assumed_count() == 0 and Recorder.log[-1].startswith("unreserve small")  # reserved, taken back
    assert sim.api.requests == []  # nothing bound
