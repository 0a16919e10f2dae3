"""A real Kubernetes control plane on loopback: etcd + kube-apiserver + kube-controller-manager (+ kube-scheduler).

kube-controller-manager runs the controllers a real cluster runs (:data:`CONTROLLERS`: its default set,
``*``): Deployments make ReplicaSets and ReplicaSets make pods, Jobs, StatefulSets (and their claims),
DaemonSets, the PersistentVolume binder (and, for development, the in-tree hostPath provisioner:
StorageClass provisioner ``kubernetes.io/host-path``, volumes under /tmp/hostpath_pv, removed by
:meth:`ControlPlane.down`), ResourceClaims
from ResourceClaimTemplates, namespace deletion, garbage collection of dependents, PodDisruptionBudget
status, ServiceAccounts and their tokens, taint eviction... It signs ServiceAccount tokens with the
same key the apiserver verifies them with and publishes the cluster's root CA (``kube-root-ca.crt``).

There is no kubelet and no networking: Node objects are created and kept Ready by whoever needs them
(tests, or KWOK playing the kubelets: :mod:`.kwok`), and pods only ever run as KWOK says they do.
So what needs a kubelet stays off:

* the ``nodelifecycle`` controller, which marks every node whose kubelet stops posting its status or
  renewing its Lease NotReady after 50 s, taints it ``unreachable:NoExecute`` and has its pods
  evicted: tests create plain Node objects nobody renews, and KWOK renews Leases only with
  heartbeats on (``Kwok(heartbeat=True)``: a write per node every 10 s);
* so the ``TaintNodesByCondition`` admission plugin too: it taints every new Node ``not-ready:NoSchedule``
  until the node-lifecycle controller removes it, which would never happen;
* ``nodeipam`` (pod CIDRs: KWOK hands out pod IPs itself).

Without the controller manager (``controller_manager=False``: a benchmark of the scheduler alone, a
harness that builds a cluster state by hand and must not see it change) the ``ServiceAccount``
admission plugin is off as well: it rejects every pod until its namespace's ``default``
ServiceAccount exists, which only the controller manager creates. With it on, pods get their
projected token volume as in any cluster (test pods opt out with ``automountServiceAccountToken: false``).

The apiserver and the controller manager serve upstream's Workload API (``scheduling.k8s.io/v1beta1``
PodGroups, and pods' ``spec.schedulingGroup``), which v1.37 keeps behind the GenericWorkload feature gate
(beta, off by default), so that gang scheduling is tested on the real types. A PodGroup gets the
finalizer ``scheduling.k8s.io/podgroup-protection``, which the controller manager's
podgroup-protection controller removes once no pod uses the group.

Every process runs in its own session (so it survives the launcher when wanted
and its whole process group can be killed) and is recorded in
``WORKDIR/state.json``, so that ``down()`` in another process stops it.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import errno
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from ..core.model import paths
from . import certs
from .build import ensure_binaries

__all__ = [
    "ControlPlane",
    "ControlPlaneError",
    "PortInUseError",
    "free_port",
    "write_kubeconfig",
]

LOOPBACK = "127.0.0.1"
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
#: off in every control plane here: nothing lifts the not-ready taint it puts on new nodes (no nodelifecycle)
DISABLED_ADMISSION_PLUGINS = ("TaintNodesByCondition",)
#: off too when no controller manager runs: nothing would create the `default` ServiceAccount it waits for
DISABLED_WITHOUT_CONTROLLER_MANAGER = ("ServiceAccount",)
ENABLED_ADMISSION_PLUGINS = ("NodeRestriction",)  # on top of the defaults (NamespaceLifecycle, Priority, ...)
FEATURE_GATES = ("GenericWorkload=true",)
RUNTIME_CONFIG = ("scheduling.k8s.io/v1beta1=true",)
#: kube-controller-manager's ``--controllers``: every controller it runs by default (what kubeadm's clusters
#: run), less node lifecycle (it needs kubelet heartbeats: see the module docstring) and node IPAM (pod CIDRs)
CONTROLLERS = ("*", "-nodelifecycle", "-nodeipam")
#: the controller manager's client rate limits (its defaults are 20 and 30 requests per second): a Deployment
#: of a few hundred replicas on the demo is created in seconds, not half a minute
#: where the in-tree hostPath provisioner (``--enable-hostpath-provisioner``) makes its volumes' folders
HOSTPATH_PROVISIONER_ROOT = "/tmp/hostpath_pv"
CONTROLLER_MANAGER_QPS = 200
CONTROLLER_MANAGER_BURST = 400

STATE_FILE = "state.json"
_STOP_ORDER = ("kube-controller-manager", "kube-apiserver", "etcd")  # anything else (schedulers) goes first
_LOG_TAIL_LINES = 40


class ControlPlaneError(RuntimeError):
    """The control plane could not be started, reached or stopped."""


class PortInUseError(ControlPlaneError):
    """A port the control plane must listen on is taken by another process."""


# --------------------------------------------------------------------------- helpers


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _claim_port(port: int | None, purpose: str) -> int:
    """Return `port` if it is free (or a fresh free port if None); else raise PortInUseError."""
    if port is None or port == 0:
        return free_port()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise PortInUseError(
                    f"cannot start {purpose}: {LOOPBACK}:{port} is already in use by another process "
                    f"(find it with `ss -ltnp 'sport = :{port}'`), choose another port or leave it unset"
                ) from exc
            raise
    return port


def _log_tail(path: Path, lines: int = _LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        return f"({path} does not exist)"
    return "\n".join(text.splitlines()[-lines:])


def _proc_start_time(pid: int) -> int | None:
    """Kernel start time of `pid` (clock ticks since boot), or None if it is gone or a zombie.

    Recorded with each pid so a later `down` never signals an unrelated process
    that happens to reuse the number.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the command name may hold spaces
    if fields[0] in ("Z", "X"):  # state: zombie or dead
        return None
    return int(fields[19])  # field 22 of stat: starttime


def _serves_healthz(port: int | None) -> bool:
    """Whether a component (kube-scheduler, kube-controller-manager) answers ok on its secure port's /healthz."""
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE  # its serving cert is self-signed
    try:
        with urllib.request.urlopen(f"https://{LOOPBACK}:{port}/healthz", timeout=1, context=insecure) as resp:
            return bool(resp.read() == b"ok")
    except OSError:
        return False


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Ask Linux to SIGKILL this child when the thread that spawned it dies."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


def write_kubeconfig(
    path: Path,
    *,
    server: str,
    ca_cert: Path,
    user: str,
    client_cert: certs.CertPair | None = None,
    token: str | None = None,
    namespace: str | None = None,
) -> Path:
    """Write a self-contained kubeconfig (credentials embedded) for one user of one server."""
    if (client_cert is None) == (token is None):
        raise ValueError("give exactly one of client_cert and token")

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    credentials: dict[str, str]
    if client_cert is not None:
        credentials = {
            "client-certificate-data": b64(client_cert.cert),
            "client-key-data": b64(client_cert.key),
        }
    else:
        assert token is not None
        credentials = {"token": token}
    context: dict[str, str] = {"cluster": "kopf-scheduler", "user": user}
    if namespace:
        context["namespace"] = namespace
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "kopf-scheduler", "cluster": {"server": server, "certificate-authority-data": b64(ca_cert)}}
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "kopf-scheduler", "context": context}],
        "current-context": "kopf-scheduler",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    # JSON is YAML: every kubeconfig reader accepts it, and it needs no YAML library here.
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
    return path


@dataclass
class _Record:
    """One launched process as persisted in state.json."""

    pid: int
    start_time: int | None
    log: str
    port: int | None = None
    #: the command line, so that :meth:`ControlPlane.restart` can start it again
    argv: list[str] | None = None

    def alive(self) -> bool:
        return self.start_time is not None and _proc_start_time(self.pid) == self.start_time


# --------------------------------------------------------------------------- the control plane


class ControlPlane:
    """etcd, kube-apiserver and kube-controller-manager on free loopback ports, with all state in `workdir`.

    Use as a context manager, or call :meth:`up` and :meth:`down`. A second
    instance for the same `workdir` (e.g. in another process) can read the
    running cluster from state.json: its :attr:`kubeconfig`, :attr:`server`,
    :meth:`status` and :meth:`down` work without having started it.

    Ports left as None are picked free; an explicit port that is taken raises
    :class:`PortInUseError`. With `die_with_parent`, children are SIGKILLed by
    the kernel if the calling thread dies (tests); without it they run on
    detached (the ``cluster up`` CLI).

    `controller_manager` False leaves kube-controller-manager out (and the ServiceAccount admission
    plugin off); `controllers` is its ``--controllers`` list (default :data:`CONTROLLERS`).
    """

    def __init__(
        self,
        workdir: Path | str,
        *,
        bin_dir: Path | str | None = None,
        apiserver_port: int | None = None,
        etcd_port: int | None = None,
        etcd_peer_port: int | None = None,
        ready_timeout: float = 60.0,
        die_with_parent: bool = False,
        extra_apiserver_args: Sequence[str] = (),
        controller_manager: bool = True,
        controllers: Sequence[str] = CONTROLLERS,
    ) -> None:
        self.workdir = Path(workdir).expanduser().resolve()
        self.bin_dir = Path(bin_dir).resolve() if bin_dir is not None else None
        self.apiserver_port = apiserver_port
        self.etcd_port = etcd_port
        self.etcd_peer_port = etcd_peer_port
        self.ready_timeout = ready_timeout
        self.die_with_parent = die_with_parent
        self.extra_apiserver_args = tuple(extra_apiserver_args)
        self.controller_manager = controller_manager
        self.controllers = tuple(controllers)
        self._popen: dict[str, subprocess.Popen[bytes]] = {}

    # ----------------------------------------------------------------- paths & state

    @property
    def pki_dir(self) -> Path:
        return self.workdir / "pki"

    @property
    def etcd_data_dir(self) -> Path:
        return self.workdir / "etcd-data"

    @property
    def state_path(self) -> Path:
        return self.workdir / STATE_FILE

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (CN=kopf-scheduler-admin, O=system:masters)."""
        return self.workdir / "kubeconfig"

    @property
    def server(self) -> str:
        """The apiserver URL, e.g. ``https://127.0.0.1:40123``."""
        state = self._read_state()
        if "server" not in state:
            raise ControlPlaneError(f"no control plane is running in {self.workdir}")
        return str(state["server"])

    @property
    def ca_cert(self) -> Path:
        return self.pki_dir / "ca.crt"

    def _read_state(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self.state_path.read_text()))
        except FileNotFoundError:
            return {}

    def _write_state(self, state: dict[str, Any]) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.state_path)

    def _records(self) -> dict[str, _Record]:
        return {name: _Record(**rec) for name, rec in self._read_state().get("processes", {}).items()}

    def _record(self, name: str, rec: _Record | None) -> None:
        state = self._read_state()
        procs = state.setdefault("processes", {})
        if rec is None:
            procs.pop(name, None)
        else:
            procs[name] = rec.__dict__
        self._write_state(state)

    def pids(self) -> dict[str, int]:
        """Pid of every recorded process that is still alive, by name."""
        return {name: rec.pid for name, rec in self._records().items() if rec.alive()}

    def port(self, name: str) -> int | None:
        """The port a recorded process listens on (e.g. a kube-scheduler's /healthz and /readyz), if any."""
        rec = self._records().get(name)
        return rec.port if rec is not None else None

    # ----------------------------------------------------------------- lifecycle

    def __enter__(self) -> ControlPlane:
        self.up()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.down()

    def up(self) -> ControlPlane:
        """Start etcd, kube-apiserver and (unless told not to) kube-controller-manager; wait until the
        apiserver's /readyz says ok and the controller manager serves and has created the ``default``
        namespace's ``default`` ServiceAccount (pods are admitted from then on).

        On any failure everything already started is stopped again before the
        error propagates.
        """
        if self.pids():
            raise ControlPlaneError(
                f"a control plane is already running in {self.workdir} (pids {self.pids()}); run down first"
            )
        self._cleanup_stale()
        bin_dir = self.bin_dir or ensure_binaries()
        self.workdir.mkdir(parents=True, exist_ok=True)
        etcd_port = _claim_port(self.etcd_port, "etcd (client port)")
        peer_port = _claim_port(self.etcd_peer_port, "etcd (peer port)")
        api_port = _claim_port(self.apiserver_port, "kube-apiserver")
        server = f"https://{LOOPBACK}:{api_port}"
        self._write_state({"server": server, "bin_dir": str(bin_dir), "processes": {}})
        try:
            pki = certs.create_pki(self.pki_dir)
            write_kubeconfig(
                self.kubeconfig, server=server, ca_cert=pki.ca.cert, user=certs.ADMIN_USER, client_cert=pki.admin
            )
            self._start_etcd(bin_dir, etcd_port, peer_port)
            self._start_apiserver(bin_dir, pki, api_port, etcd_port)
            if self.controller_manager:
                self._start_controller_manager(bin_dir, pki)
        except BaseException:
            self.down()
            raise
        return self

    def down(self, timeout: float = 15.0) -> None:
        """Stop every recorded process (schedulers, then apiserver, then etcd) and wait for each.

        Works from any process. Logs, certificates and kubeconfigs stay in
        the workdir; etcd's data and state.json go.
        """
        records = self._records()
        provisioned = self._hostpath_volumes() if "kube-controller-manager" in records else []
        order = [n for n in records if n not in _STOP_ORDER] + [n for n in _STOP_ORDER if n in records]
        errors = []
        for name in order:
            try:
                self._stop(name, records[name], timeout)
            except ControlPlaneError as exc:
                errors.append(str(exc))
        shutil.rmtree(self.etcd_data_dir, ignore_errors=True)
        for path in provisioned:
            shutil.rmtree(path, ignore_errors=True)
        self.state_path.unlink(missing_ok=True)
        if errors:
            raise ControlPlaneError("; ".join(errors))

    def _hostpath_volumes(self) -> list[Path]:
        """The folders the controller manager's hostPath provisioner made for this cluster's volumes (it makes
        them under /tmp/hostpath_pv on this machine; they outlive the cluster unless removed)."""
        try:
            listing = self.request("GET", paths.collection("v1", "persistentvolumes"), timeout=5)
        except (OSError, ValueError, ControlPlaneError):
            return []
        folders = []
        for pv in listing.get("items", []) if isinstance(listing, dict) else ():
            annotations = pv["metadata"].get("annotations") or {}
            path = ((pv.get("spec") or {}).get("hostPath") or {}).get("path", "")
            if annotations.get("pv.kubernetes.io/provisioned-by") == "kubernetes.io/host-path" and path.startswith(
                HOSTPATH_PROVISIONER_ROOT + "/"
            ):
                folders.append(Path(path))
        return folders

    def stop_process(self, name: str, timeout: float = 15.0) -> None:
        """Stop one recorded process, e.g. a kube-scheduler started by :meth:`start_kube_scheduler`."""
        rec = self._records().get(name)
        if rec is not None:
            self._stop(name, rec, timeout)

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Signal one recorded process (SIGKILL by default: a crash, nothing flushed) and reap it.

        Its record stays, so :meth:`restart` can start it again; :meth:`down` forgets it.
        """
        rec = self._records().get(name)
        if rec is None or not rec.alive():
            raise ControlPlaneError(f"{name} is not running")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(rec.pid, sig)
        if not self._wait_gone(rec, self._popen.pop(name, None), 15.0):
            raise ControlPlaneError(f"{name} (pid {rec.pid}) survived signal {sig}")

    def restart(self, name: str) -> float:
        """Start a killed etcd, kube-apiserver or kube-controller-manager again, with its data and command
        line, and wait until it serves (etcd: /health; kube-apiserver: /readyz; the controller manager:
        /healthz). Returns the seconds that took."""
        rec = self._records().get(name)
        if rec is None or rec.argv is None:
            raise ControlPlaneError(f"{name} was never started here, or was started without a recorded command line")
        if rec.alive():
            raise ControlPlaneError(f"{name} is still running (pid {rec.pid}): kill it first")
        ready = {
            "etcd": lambda: self._etcd_healthy(rec.port),
            "kube-apiserver": self._readyz,
            "kube-controller-manager": lambda: _serves_healthz(rec.port),
        }.get(name)
        if ready is None:
            raise ControlPlaneError(f"restart knows etcd, kube-apiserver and kube-controller-manager, not {name}")
        started = time.monotonic()
        log = Path(rec.log)
        popen = self._spawn(name, rec.argv, log, rec.port)  # the log is appended to
        self._wait_until(name, popen, log, ready, self.ready_timeout)
        return time.monotonic() - started

    def _stop(self, name: str, rec: _Record, timeout: float) -> None:
        popen = self._popen.pop(name, None)
        if rec.alive():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(rec.pid, signal.SIGTERM)  # pgid == pid: each child leads its own session
            if not self._wait_gone(rec, popen, timeout):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(rec.pid, signal.SIGKILL)
                if not self._wait_gone(rec, popen, 5.0):
                    raise ControlPlaneError(f"{name} (pid {rec.pid}) survived SIGKILL")
        elif popen is not None:
            popen.wait()  # reap it
        self._record(name, None)

    @staticmethod
    def _wait_gone(rec: _Record, popen: subprocess.Popen[bytes] | None, timeout: float) -> bool:
        if popen is not None:  # our own child: wait() reaps it, so no zombie remains
            try:
                popen.wait(timeout)
                return True
            except subprocess.TimeoutExpired:
                return False
        deadline = time.monotonic() + timeout
        while rec.alive():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def _cleanup_stale(self) -> None:
        """Forget the state of a cluster whose processes are all gone (e.g. after a reboot)."""
        if self.state_path.exists():
            self.down()

    # ----------------------------------------------------------------- processes

    def _spawn(
        self, name: str, argv: list[str], log: Path, port: int | None, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        with log.open("ab") as out:
            popen = subprocess.Popen(
                argv,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
                preexec_fn=_die_with_parent if self.die_with_parent else None,
            )
        self._popen[name] = popen
        self._record(
            name, _Record(pid=popen.pid, start_time=_proc_start_time(popen.pid), log=str(log), port=port, argv=argv)
        )
        return popen

    def _wait_until(
        self, name: str, popen: subprocess.Popen[bytes], log: Path, ready: Callable[[], bool], timeout: float
    ) -> None:
        """Poll `ready` until true; fail early if the process exits, with its log tail."""
        deadline = time.monotonic() + timeout
        while True:
            if popen.poll() is not None:
                tail = _log_tail(log)
                error = PortInUseError if "address already in use" in tail else ControlPlaneError
                raise error(f"{name} exited with status {popen.returncode} while starting; end of {log}:\n{tail}")
            if ready():
                return
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"{name} was not ready after {timeout:.0f}s; end of {log}:\n{_log_tail(log)}")
            time.sleep(0.1)

    def _start_etcd(self, bin_dir: Path, port: int, peer_port: int) -> None:
        shutil.rmtree(self.etcd_data_dir, ignore_errors=True)
        client, peer = f"http://{LOOPBACK}:{port}", f"http://{LOOPBACK}:{peer_port}"
        log = self.workdir / "etcd.log"
        log.unlink(missing_ok=True)
        argv = [
            str(bin_dir / "etcd"),
            "--name=kopf-scheduler",
            f"--data-dir={self.etcd_data_dir}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=kopf-scheduler={peer}",
            "--initial-cluster-state=new",
            "--unsafe-no-fsync",  # throw-away data: durability buys nothing, fsync costs a lot
            "--log-level=warn",
        ]
        popen = self._spawn("etcd", argv, log, port)
        self._wait_until("etcd", popen, log, lambda: self._etcd_healthy(port), self.ready_timeout)

    @staticmethod
    def _etcd_healthy(port: int | None) -> bool:
        try:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/health", timeout=1) as resp:
                return bool(json.load(resp).get("health") == "true")
        except (OSError, ValueError):
            return False

    def _start_apiserver(self, bin_dir: Path, pki: certs.Pki, port: int, etcd_port: int) -> None:
        log = self.workdir / "kube-apiserver.log"
        log.unlink(missing_ok=True)
        argv = [
            str(bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://{LOOPBACK}:{etcd_port}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--secure-port={port}",
            f"--cert-dir={self.pki_dir}",
            f"--tls-cert-file={pki.serving.cert}",
            f"--tls-private-key-file={pki.serving.key}",
            f"--client-ca-file={pki.ca.cert}",
            "--authorization-mode=Node,RBAC",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki.service_account_pub}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
            f"--enable-admission-plugins={','.join(ENABLED_ADMISSION_PLUGINS)}",
            f"--disable-admission-plugins={','.join(self.disabled_admission_plugins)}",
            f"--feature-gates={','.join(FEATURE_GATES)}",
            f"--runtime-config={','.join(RUNTIME_CONFIG)}",
            "--allow-privileged=true",  # as kubeadm's clusters: pods may ask for privileged containers
            # The lease endpoint reconciler refuses loopback addresses, and nothing here
            # reaches the apiserver through the `kubernetes` Service anyway.
            "--endpoint-reconciler-type=none",
            "--profiling=false",
            *self.extra_apiserver_args,
        ]
        popen = self._spawn("kube-apiserver", argv, log, port)
        self._wait_until("kube-apiserver", popen, log, self._readyz, self.ready_timeout)

    @property
    def disabled_admission_plugins(self) -> tuple[str, ...]:
        """The apiserver's ``--disable-admission-plugins``: see the module docstring."""
        return DISABLED_ADMISSION_PLUGINS + (() if self.controller_manager else DISABLED_WITHOUT_CONTROLLER_MANAGER)

    def _start_controller_manager(self, bin_dir: Path, pki: certs.Pki) -> None:
        """kube-controller-manager as ``system:kube-controller-manager`` (bound by the bootstrap RBAC policy),
        each controller with its own ServiceAccount's credentials as kubeadm runs it; then wait for it to
        serve /healthz and for the ``default`` ServiceAccount (its serviceaccount controller's first work)."""
        name = "kube-controller-manager"
        kubeconfig = self._component_kubeconfig(name, "system:kube-controller-manager")
        port = free_port()
        log = self.workdir / f"{name}.log"
        log.unlink(missing_ok=True)
        argv = [
            str(bin_dir / name),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / (name + '-certs')}",
            "--leader-elect=false",
            f"--controllers={','.join(self.controllers)}",
            "--use-service-account-credentials=true",
            f"--service-account-private-key-file={pki.service_account_key}",
            f"--root-ca-file={pki.ca.cert}",
            f"--cluster-signing-cert-file={pki.ca.cert}",
            f"--cluster-signing-key-file={pki.ca.key}",
            "--cluster-name=kopf-scheduler",
            f"--feature-gates={','.join(FEATURE_GATES)}",
            "--enable-hostpath-provisioner=true",
            f"--kube-api-qps={CONTROLLER_MANAGER_QPS}",
            f"--kube-api-burst={CONTROLLER_MANAGER_BURST}",
            "--profiling=false",
        ]
        popen = self._spawn(name, argv, log, port)
        self._wait_until(name, popen, log, lambda: _serves_healthz(port), self.ready_timeout)
        self._wait_until(
            name,
            popen,
            log,
            lambda: self._exists(paths.item("v1", "serviceaccounts", "default", namespace="default")),
            self.ready_timeout,
        )

    def _component_kubeconfig(self, name: str, user: str) -> Path:
        """A client certificate for `user` (CN) and a kubeconfig holding it, ``WORKDIR/<name>.kubeconfig``."""
        pair = certs.issue_client_cert(certs.CertPair(self.ca_cert, self.pki_dir / "ca.key"), self.pki_dir, name, user)
        return write_kubeconfig(
            self.workdir / f"{name}.kubeconfig", server=self.server, ca_cert=self.ca_cert, user=user, client_cert=pair
        )

    def _exists(self, path: str) -> bool:
        try:
            self.request("GET", path, timeout=2)
            return True
        except (OSError, ValueError):  # 404 (an HTTPError, an OSError) until it exists
            return False

    def binary(self, name: str) -> Path:
        """Path of one of the control-plane binaries this cluster runs (etcd, kubectl, ...)."""
        recorded = self._read_state().get("bin_dir")
        return Path(recorded or self.bin_dir or ensure_binaries()) / name

    def kubectl(self, *args: str, check: bool = True, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run our pinned kubectl (never whatever `kubectl` is on PATH) as admin; capture output."""
        return subprocess.run(
            [str(self.binary("kubectl")), f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
        )

    # ----------------------------------------------------------------- talking to the apiserver

    def _ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_cert))
        ctx.load_cert_chain(self.pki_dir / "admin.crt", self.pki_dir / "admin.key")
        return ctx

    def request(self, method: str, path: str, body: dict[str, Any] | None = None, timeout: float = 10.0) -> Any:
        """Call the apiserver as admin and return the decoded JSON (or text) response.

        Deliberately stdlib-only so this package needs no Kubernetes client.
        Raises urllib.error.HTTPError for non-2xx answers.
        """
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        with urllib.request.urlopen(req, timeout=timeout, context=self._ssl_context()) as resp:
            raw = resp.read()
            if resp.headers.get_content_type() == "application/json":
                return json.loads(raw)
            return raw.decode()

    def _readyz(self) -> bool:
        try:
            return bool(self.request("GET", "/readyz", timeout=2) == "ok")
        except (OSError, ValueError):  # refused, TLS not up yet, 500 while hooks run, ...
            return False

    def status(self) -> dict[str, Any]:
        """What is recorded and alive, and whether /readyz says ok."""
        state = self._read_state()
        procs = {name: {"pid": rec.pid, "alive": rec.alive(), "log": rec.log} for name, rec in self._records().items()}
        return {
            "workdir": str(self.workdir),
            "server": state.get("server"),
            "kubeconfig": str(self.kubeconfig) if state else None,
            "ready": bool(state) and self._readyz(),
            "processes": procs,
        }

    # ----------------------------------------------------------------- extra identities

    def user_kubeconfig(self, user: str, groups: Sequence[str] = (), path: Path | None = None) -> Path:
        """Write a kubeconfig that authenticates as `user` in `groups` with a client certificate.

        Works with every client (unlike impersonation, which the Python client
        does not read from kubeconfig). RBAC applies as for any other user.
        """
        name = "user-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in user)
        pair = certs.issue_client_cert(
            certs.CertPair(self.ca_cert, self.pki_dir / "ca.key"), self.pki_dir, name, user, tuple(groups)
        )
        return write_kubeconfig(
            path or self.workdir / f"{name}.kubeconfig",
            server=self.server,
            ca_cert=self.ca_cert,
            user=user,
            client_cert=pair,
        )

    def service_account_kubeconfig(
        self, namespace: str, name: str, *, expiration_seconds: int = 3600, path: Path | None = None
    ) -> Path:
        """Write a kubeconfig holding a bound token of ServiceAccount `namespace/name`.

        Creates the ServiceAccount if missing (the namespace must exist) and
        gets the token from the TokenRequest API, as a kubelet would.
        """
        sa_path = paths.collection("v1", "serviceaccounts", namespace=namespace)
        try:
            self.request("POST", sa_path, {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}})
        except urllib.error.HTTPError as exc:
            if exc.code != 409:  # 409: it exists already
                raise
        answer = self.request(
            "POST",
            f"{sa_path}/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": expiration_seconds},
            },
        )
        return write_kubeconfig(
            path or self.workdir / f"sa-{namespace}-{name}.kubeconfig",
            server=self.server,
            ca_cert=self.ca_cert,
            user=f"system:serviceaccount:{namespace}:{name}",
            token=answer["status"]["token"],
            namespace=namespace,
        )

    # ----------------------------------------------------------------- upstream kube-scheduler

    def start_kube_scheduler(
        self, extra_args: Sequence[str] = (), *, name: str = "kube-scheduler", timeout: float = 30.0
    ) -> int:
        """Start the upstream kube-scheduler against this apiserver; return its pid.

        It authenticates as CN=system:kube-scheduler (bound by the bootstrap
        RBAC policy), runs without leader election, serves /healthz on a free
        loopback port and logs to ``WORKDIR/<name>.log``. `extra_args` go last,
        e.g. ``["--config=sched.yaml"]``. Stopped by :meth:`down` or
        ``stop_process(name)``.
        """
        if name in self.pids():
            raise ControlPlaneError(f"{name} is already running (pid {self.pids()[name]})")
        kubeconfig = self._component_kubeconfig(name, "system:kube-scheduler")
        port = free_port()
        log = self.workdir / f"{name}.log"
        log.unlink(missing_ok=True)
        argv = [
            str(self.binary("kube-scheduler")),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false",
            f"--bind-address={LOOPBACK}",
            f"--secure-port={port}",
            f"--cert-dir={self.workdir / (name + '-certs')}",
            *extra_args,
        ]
        popen = self._spawn(name, argv, log, port)
        try:
            self._wait_until(name, popen, log, lambda: _serves_healthz(port), timeout)
        except BaseException:
            self.stop_process(name)
            raise
        return popen.pid
