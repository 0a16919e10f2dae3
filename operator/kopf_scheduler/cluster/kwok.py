"""KWOK (sigs.k8s.io/kwok), the ecosystem's simulated kubelets, against the local control plane.

The control plane has no kubelet. KWOK's controller plays one for every node it manages: it makes a
new Node Ready, moves a pod bound to it to Running, and finishes a pod that is deleted, by playing
*stages* (rules written as Kubernetes objects: a selector over the object, a delay, the status to
write). The binary and KWOK's own stage files come from ``tools/kwok/build.sh`` (the Go module proxy,
like the control plane); :func:`ensure_kwok` runs it, and is a no-op once the cache is warm.

Only nodes annotated ``kwok.x-k8s.io/node: fake`` (:func:`kwok_node`) are managed, so the nodes other
tests create and keep Ready themselves are left alone. Such a node is created with its capacity,
addresses and labels but without conditions; KWOK writes them (Ready, no pressure) once.

What runs by default (:data:`LIFECYCLE_STAGES`) happens once per object, nothing periodic: a
scheduler benchmark then measures the scheduler, not heartbeats. ``heartbeat=True`` adds what a
kubelet does every few seconds to minutes (:data:`HEARTBEAT_STAGES` and a node Lease renewed every
:data:`LEASE_SECONDS` / 4 s), which costs the API server a write per node each time.

Nothing here looks for Go or the binary at import time.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from ..core.model import paths
from . import certs
from .bodies import NodeBody, fake_node_ip, node_body
from .build import BuildError, controlplane_dir, run_build_script
from .controlplane import LOOPBACK, ControlPlane, ControlPlaneError, free_port, write_kubeconfig

__all__ = [
    "HEARTBEAT_STAGES",
    "KWOK_NODE_ANNOTATION",
    "LIFECYCLE_STAGES",
    "NODE_ALLOCATABLE_STAGE",
    "POD_DELETE_STAGES",
    "Kwok",
    "KwokInstall",
    "create_simulated_nodes",
    "ensure_kwok",
    "kwok_node",
    "kwok_tools_dir",
]

#: the annotation (and value) of the nodes KWOK manages: ``--manage-nodes-with-annotation-selector``
KWOK_NODE_ANNOTATION = ("kwok.x-k8s.io/node", "fake")

#: KWOK's "fast" stages (kustomize/stage of its module), each played once per object:
#: a node without a Ready=True condition becomes Ready (conditions, nodeInfo; capacity, allocatable
#: and addresses kept as created); a bound Pending pod goes Running (conditions, container statuses,
#: hostIP, podIP); a running pod owned by a Job completes. Deleted pods go by :data:`POD_DELETE_STAGES`.
LIFECYCLE_STAGES = (
    "node/fast/node-initialize.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
)


def _pod_delete_stage(name: str, pre_stop: str, delay: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {
            "matchExpressions": [
                {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
                # a pod deleted with no grace period is gone already (the API server removes it at once); KWOK
                # still sees its last state, and deleting it by name would delete a new pod of the same name
                {"key": ".metadata.deletionGracePeriodSeconds > 0", "operator": "In", "values": ["true"]},
                {"key": ".spec.containers[].lifecycle.preStop", "operator": pre_stop},
            ]
        },
        "next": {"delete": True},
    }
    if delay is not None:
        spec["delay"] = delay
    return {"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": {"name": name}, "spec": spec}


#: Our stages for a deleted pod, as a kubelet ends it: at once when no container has a preStop hook (its
#: containers exit on SIGTERM, as pause does; KWOK's fast pod-delete), else when its grace period ends (the
#: kubelet runs the hook for at most that long, and hooks that sleep take all of it): so a preemption victim
#: with ``terminationGracePeriodSeconds`` and a sleeping preStop hook stays Terminating meanwhile, which
#: upstream's e2e specs rely on. A second delete with a shorter grace period moves the end earlier.
POD_DELETE_STAGES = (
    _pod_delete_stage("pod-delete", "DoesNotExist", None),
    _pod_delete_stage(
        "pod-delete-after-pre-stop",
        "Exists",
        {"durationMilliseconds": 0, "durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"}},
    ),
)
#: which names of a node's capacity and allocatable are extended resources (a domain prefix, not kubernetes.io's)
_EXTENDED = 'contains("/") and (contains("kubernetes.io/") | not)'
#: Our stage for what a kubelet's node status sync does with extended resources (nodestatus.MachineInfo): each
#: one in capacity is allocatable too, and one no longer in capacity leaves allocatable. It plays on a node
#: whose capacity and allocatable differ in an extended resource, e.g. after someone added one to the capacity
#: by hand, as upstream's pod-overhead e2e spec does.
NODE_ALLOCATABLE_STAGE: dict[str, Any] = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1",
    "kind": "Stage",
    "metadata": {"name": "node-extended-resources-allocatable"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Node"},
        "selector": {
            "matchExpressions": [
                {
                    "key": "(.status.capacity // {}) as $c | (.status.allocatable // {}) as $a"
                    f" | (($c | keys[]), ($a | keys[])) | select({_EXTENDED}) | select($c[.] != $a[.])",
                    "operator": "Exists",
                }
            ]
        },
        "next": {
            "statusTemplate": (
                "allocatable:\n"
                '{{ range $name, $value := .status.capacity }}{{ if and (contains "/" $name)'
                ' (not (contains "kubernetes.io/" $name)) }}\n'
                "  {{ $name | Quote }}: {{ $value | Quote }}\n"
                "{{ end }}{{ end }}"
                '{{ range $name, $value := .status.allocatable }}{{ if and (contains "/" $name)'
                ' (not (contains "kubernetes.io/" $name)) (not (hasKey $.status.capacity $name)) }}\n'
                "  {{ $name | Quote }}: null\n"
                "{{ end }}{{ end }}"
            )
        },
    },
}

#: a Ready node's conditions posted again every 10 to 20 minutes (KWOK's own numbers), on top of its Lease
HEARTBEAT_STAGES = ("node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",)
#: the node Lease's duration with ``heartbeat=True`` (a kubelet's default); KWOK renews it every quarter
LEASE_SECONDS = 40
#: KWOK's pod IPs (a status field: nothing is routed)
POD_CIDR = "10.244.0.0/16"

#: Points at a folder with prebuilt ``bin/kwok`` and ``stages/`` (what build.sh prints); no build then.
ENV_KWOK_DIR = "KOPF_SCHEDULER_KWOK_DIR"
#: Points at a tools/kwok checkout (the folder holding build.sh).
ENV_KWOK_TOOLS_DIR = "KOPF_SCHEDULER_KWOK_TOOLS_DIR"


@dataclass(frozen=True)
class KwokInstall:
    """A built KWOK: ``ROOT/bin/kwok`` and KWOK's stage files under ``ROOT/stages`` (their module paths)."""

    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "kwok"

    def stage(self, relative: str) -> Path:
        """One stage file, by its path under the module's kustomize/stage (``pod/fast/pod-ready.yaml``)."""
        return self.root / "stages" / relative

    def stages(self, *, heartbeat: bool = False) -> list[Path]:
        """The stage files a :class:`Kwok` plays: the lifecycle, plus heartbeats when asked."""
        return [self.stage(s) for s in (*LIFECYCLE_STAGES, *(HEARTBEAT_STAGES if heartbeat else ()))]

    def check(self) -> KwokInstall:
        missing = [p for p in (self.binary, *self.stages(heartbeat=True)) if not p.is_file()]
        if missing or not os.access(self.binary, os.X_OK):
            raise BuildError(f"{self.root} is not a KWOK build: missing {', '.join(map(str, missing)) or 'x bit'}")
        return self


def kwok_tools_dir() -> Path:
    """The tools/kwok folder: $KOPF_SCHEDULER_KWOK_TOOLS_DIR, or beside tools/controlplane."""
    explicit = os.environ.get(ENV_KWOK_TOOLS_DIR)
    candidate = Path(explicit).expanduser() if explicit else controlplane_dir().parent / "kwok"
    if not (candidate / "build.sh").is_file():
        raise BuildError(
            f"cannot find {candidate / 'build.sh'}: install kopf-scheduler editable from its repository "
            f"(pip install -e .), or set ${ENV_KWOK_TOOLS_DIR} to tools/kwok, or ${ENV_KWOK_DIR} to a prebuilt KWOK"
        )
    return candidate.resolve()


def ensure_kwok(
    cache_dir: Path | None = None,
    *,
    env: dict[str, str] | None = None,
    echo: bool = True,
) -> KwokInstall:
    """Return the built KWOK, building it first when the cache is cold (2 to 3.5 minutes on 2 cores).

    Like :func:`~kopf_scheduler.cluster.ensure_binaries`: progress goes to stderr when `echo` is
    true; `cache_dir` overrides the cache root ($KOPF_SCHEDULER_CACHE or ~/.cache/kopf-scheduler);
    `env` replaces the environment of the build; $KOPF_SCHEDULER_KWOK_DIR names a prebuilt copy.
    Raises :class:`~kopf_scheduler.cluster.GoNotFoundError` when a build is needed and Go is missing.
    """
    environ = dict(os.environ if env is None else env)
    prebuilt = environ.get(ENV_KWOK_DIR)
    if prebuilt and cache_dir is None:
        return KwokInstall(Path(prebuilt).expanduser().resolve()).check()
    root = run_build_script(kwok_tools_dir() / "build.sh", "KWOK", cache_dir, environ, echo, prebuilt_env=ENV_KWOK_DIR)
    return KwokInstall(root).check()


def kwok_node(body: NodeBody) -> NodeBody:
    """Hand `body` to KWOK: its annotation on, and no conditions (KWOK writes them; a node created
    Ready=True would never be initialised). Create it with ``obj()``, status included.

    A node with addresses gets a ``Hostname`` one too, as kubelets report: KWOK's node-initialize
    stage rewrites ``status.addresses`` when either InternalIP or Hostname is missing, and with no
    ``--node-name`` it would write an empty list (a pod's hostIP comes from these addresses).
    """
    body.annotation(*KWOK_NODE_ANNOTATION)
    status = body.body.get("status", {})
    status.pop("conditions", None)
    addresses = status.get("addresses")
    if addresses and not any(a.get("type") == "Hostname" for a in addresses):
        body.address(body.name, "Hostname")
    return body


def create_simulated_nodes(
    cp: ControlPlane,
    count: int,
    *,
    cpu: str = "4",
    memory: str = "16Gi",
    prefix: str = "kwok-node-",
    zones: Sequence[str] = ("zone-a", "zone-b", "zone-c"),
) -> tuple[list[str], int]:
    """Create nodes ``<prefix>0..count-1`` for KWOK (:func:`kwok_node`): hostname, zone (round-robin over
    `zones`), linux/amd64, `cpu` and `memory`, 110 pods, 100Gi of ephemeral storage, an InternalIP. Nodes
    that exist already are kept as they are. Returns the names and how many were created; KWOK (running
    or started later) makes them Ready: :meth:`Kwok.wait_nodes_ready`."""
    names = [f"{prefix}{i}" for i in range(count)]
    created = 0
    for i, name in enumerate(names):
        body = node_body(name).hostname().zone(zones[i % len(zones)]).platform()
        body.capacity(cpu=cpu, memory=memory, pods="110", ephemeral_storage="100Gi").address(fake_node_ip(i))
        try:
            cp.request("POST", paths.collection("v1", "nodes"), kwok_node(body).obj())
            created += 1
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # 409: it exists already
                raise ControlPlaneError(f"cannot create node {name}: HTTP {exc.code} {exc.reason}") from exc
    return names, created


class Kwok:
    """One KWOK controller playing the kubelet of the annotated nodes of `cp`.

    It runs as process `name` of the control plane (in its state.json, its log ``WORKDIR/<name>.log``),
    so :meth:`ControlPlane.down` and ``kopf-scheduler cluster down`` stop it too, and it dies with its
    parent when the control plane's processes do (``die_with_parent``). It authenticates with a
    client certificate of its own (user ``kwok-controller`` in system:masters), so an audit log tells
    its writes apart. Use as a context manager, or :meth:`start` and :meth:`stop`.

    `log_level` is KWOK's (DEBUG, INFO, WARN, ERROR): INFO logs a line per object it patches, which
    suits a demo; WARN keeps thousands of pods from filling the log.
    """

    def __init__(
        self,
        cp: ControlPlane,
        *,
        install: KwokInstall | None = None,
        heartbeat: bool = False,
        name: str = "kwok",
        log_level: str = "INFO",
        ready_timeout: float = 30.0,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.cp = cp
        self.install = install
        self.heartbeat = heartbeat
        self.name = name
        self.log_level = log_level
        self.ready_timeout = ready_timeout
        self.extra_args = tuple(extra_args)

    @property
    def log(self) -> Path:
        return self.cp.workdir / f"{self.name}.log"

    @property
    def port(self) -> int | None:
        """Where it serves /healthz and /metrics on 127.0.0.1, while it runs."""
        return self.cp.port(self.name)

    @property
    def pid(self) -> int | None:
        return self.cp.pids().get(self.name)

    def __enter__(self) -> Kwok:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def home(self) -> Path:
        """$KWOK_WORKDIR (KWOK reads kwok.yaml there: not the user's ~/.kwok) and our own stage file."""
        return self.cp.workdir / f"{self.name}-home"

    @property
    def own_stages(self) -> Path:
        """:data:`POD_DELETE_STAGES` and :data:`NODE_ALLOCATABLE_STAGE` as KWOK reads them (:meth:`start` writes it)."""
        return self.home / "kubelet-stages.yaml"

    def argv(self, install: KwokInstall, kubeconfig: Path, port: int) -> list[str]:
        annotation = "=".join(KWOK_NODE_ANNOTATION)
        return [
            str(install.binary),
            f"--kubeconfig={kubeconfig}",
            f"--manage-nodes-with-annotation-selector={annotation}",
            *(f"--config={stage}" for stage in install.stages(heartbeat=self.heartbeat)),
            f"--config={self.own_stages}",
            f"--node-lease-duration-seconds={LEASE_SECONDS if self.heartbeat else 0}",  # 0: no Leases
            f"--server-address={LOOPBACK}:{port}",
            f"--cidr={POD_CIDR}",
            f"-v={self.log_level}",
            *self.extra_args,
        ]

    def start(self) -> Kwok:
        """Start KWOK (building it on first use) and wait until it serves /healthz; return self."""
        if self.name in self.cp.pids():
            raise ControlPlaneError(f"{self.name} is already running (pid {self.cp.pids()[self.name]})")
        install = (self.install or ensure_kwok()).check()
        pair = certs.issue_client_cert(
            certs.CertPair(self.cp.ca_cert, self.cp.pki_dir / "ca.key"),
            self.cp.pki_dir,
            self.name,
            "kwok-controller",
            ("system:masters",),
        )
        kubeconfig = write_kubeconfig(
            self.cp.workdir / f"{self.name}.kubeconfig",
            server=self.cp.server,
            ca_cert=self.cp.ca_cert,
            user="kwok-controller",
            client_cert=pair,
        )
        home = self.home
        home.mkdir(parents=True, exist_ok=True)
        # JSON documents are YAML; KWOK reads a file of several, separated by ---
        self.own_stages.write_text(
            "\n---\n".join(json.dumps(stage) for stage in (*POD_DELETE_STAGES, NODE_ALLOCATABLE_STAGE)) + "\n"
        )
        port = free_port()
        self.log.unlink(missing_ok=True)
        argv = self.argv(install, kubeconfig, port)
        popen = self.cp._spawn(self.name, argv, self.log, port, env={**os.environ, "KWOK_WORKDIR": str(home)})

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/healthz", timeout=1) as resp:
                    return bool(resp.read() == b"ok")
            except OSError:
                return False

        try:
            self.cp._wait_until(self.name, popen, self.log, healthy, self.ready_timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 15.0) -> None:
        """Stop it (SIGTERM, then SIGKILL); a no-op when it is not running."""
        self.cp.stop_process(self.name, timeout)

    # ----------------------------------------------------------------- looking

    def wait_nodes_ready(self, names: Sequence[str], timeout: float = 60.0) -> float:
        """Wait until every node of `names` is Ready; return the seconds that took.

        Lists the nodes once, then watches them (polling thousands of nodes would cost the API
        server more than KWOK does). Raises ControlPlaneError, with KWOK's log tail, on timeout or
        when KWOK is not running.
        """
        started = time.monotonic()
        deadline = started + timeout
        wanted = set(names)
        ready: set[str] = set()
        version = ""
        while True:
            if not version:  # first, or the watch's resourceVersion expired (410 Gone): list
                listing: Any = self.cp.request("GET", paths.collection("v1", "nodes"), timeout=60)
                ready = {n["metadata"]["name"] for n in listing["items"] if _ready(n)} & wanted
                version = listing["metadata"]["resourceVersion"]
            if ready >= wanted:
                return time.monotonic() - started
            if self.pid is None:
                raise ControlPlaneError(f"{self.name} is not running; end of {self.log}:\n{_tail(self.log)}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ControlPlaneError(
                    f"{len(ready)} of {len(wanted)} KWOK nodes Ready after {timeout:.0f}s; end of {self.log}:\n"
                    + _tail(self.log)
                )
            query = urllib.parse.urlencode(
                {"watch": "1", "resourceVersion": version, "timeoutSeconds": str(max(1, min(5, int(remaining))))}
            )
            request = urllib.request.Request(f"{self.cp.server}{paths.collection('v1', 'nodes')}?{query}")
            with urllib.request.urlopen(request, timeout=30, context=self.cp._ssl_context()) as stream:
                for line in stream:
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        version = ""
                        break
                    node = event["object"]
                    version = node["metadata"]["resourceVersion"]
                    name = node["metadata"]["name"]
                    if name in wanted:
                        if event["type"] != "DELETED" and _ready(node):
                            ready.add(name)
                        else:
                            ready.discard(name)
                    if ready >= wanted:
                        break


def _ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return f"({path} does not exist)"
