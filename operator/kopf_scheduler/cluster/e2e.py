"""Upstream's own scheduling end-to-end tests against a scheduler on the local control plane.

Kubernetes' end-to-end binary, ``e2e.test`` (``k8s.io/kubernetes/test/e2e`` at the release the control
plane runs, built by ``tools/e2e/build.sh``: :func:`ensure_e2e`), runs its ``[sig-scheduling]`` specs
against a cluster of our own making (:func:`run_suite`):

1. a fresh :class:`~.controlplane.ControlPlane` with kube-controller-manager (the specs make
   ReplicaSets, ReplicationControllers and Deployments, delete namespaces and wait for garbage
   collection), and KWOK playing the kubelets of :data:`NODES` simulated nodes over three zones;
2. the scheduler under test serving ``default-scheduler`` (the name every e2e pod leaves to the
   default), nothing else scheduling:

   * ``kopf-scheduler``: ``python -m kopf_scheduler.commands run`` with the identity users install
     (deploy/rbac.yaml's ServiceAccount, its token from the TokenRequest API), and one SchedulingPolicy
     naming ``default-scheduler`` and nothing else, so upstream's default profile;
   * ``kube-scheduler``: upstream v1.37.2 with its defaults, the reference (and the control plane's feature
     gates: GenericWorkload, so that it serves the Workload API's gangs as kopf-scheduler does);
3. in kube-system, the per-node system pods e2e's ``WaitForTotalHealthy`` looks for (kube-proxy,
   fluentd-elasticsearch, node-problem-detector: :data:`SYSTEM_DAEMONSETS`), as DaemonSets of pause
   containers requesting nothing that the scheduler under test places and KWOK runs. Every
   SchedulerPreemption spec waits a minute for them before it starts and then goes on regardless: they
   change no outcome, only spare that minute;
4. ``e2e.test --ginkgo.focus=... --ginkgo.skip=...`` as admin, its JSON report read into
   :class:`SpecResult` values.

:data:`CONFORMANCE` selects the [Conformance] specs every conformant cluster's scheduler passes;
:data:`SCHEDULING` every ``[sig-scheduling]`` spec; :data:`CI` all of them but :data:`KNOWN_FAILURES`. What
fails for both schedulers because this cluster has no real kubelet, container runtime, network or cloud is in
:data:`ENVIRONMENT`, with the reason.

Run it with ``kopf-scheduler cluster e2e`` (``--scheduler both`` for the table with the reference).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from ..core.model import paths
from .build import BuildError, controlplane_dir, ensure_binaries, run_build_script
from .controlplane import FEATURE_GATES, LOOPBACK, ControlPlane, ControlPlaneError, free_port
from .kwok import Kwok, create_simulated_nodes, ensure_kwok

__all__ = [
    "CI",
    "CONFORMANCE",
    "ENVIRONMENT",
    "KNOWN_FAILURES",
    "NODES",
    "SCHEDULERS",
    "SCHEDULING",
    "E2eInstall",
    "Selection",
    "SpecResult",
    "ensure_e2e",
    "run_suite",
]

Scheduler = Literal["kopf-scheduler", "kube-scheduler"]
SCHEDULERS: Final[tuple[Scheduler, ...]] = ("kopf-scheduler", "kube-scheduler")


@dataclass(frozen=True)
class Selection:
    """Which specs to run: ginkgo's ``--ginkgo.focus`` and ``--ginkgo.skip`` regular expressions."""

    name: str
    focus: str
    skip: str = ""


#: the 11 [Conformance] specs of [sig-scheduling]
CONFORMANCE: Final = Selection("conformance", r"\[sig-scheduling\].*\[Conformance\]")
#: every [sig-scheduling] spec
SCHEDULING: Final = Selection("sig-scheduling", r"\[sig-scheduling\]")

#: simulated nodes, and their size: the specs fill nodes to a fraction of what they offer, so the size only
#: sets how many pods that takes
NODES: Final = 3
NODE_CPU: Final = "4"
NODE_MEMORY: Final = "16Gi"

#: the per-node kube-system pods test/e2e/framework/node/wait.go's WaitForTotalHealthy waits for (names matched by
#: its requiredPerNodePods patterns)
SYSTEM_DAEMONSETS: Final = ("kube-proxy", "fluentd-elasticsearch", "node-problem-detector")

#: specs that fail here whichever scheduler runs, and why (the README's table quotes these). None in v1.37.2 since
#: KWOK ends a terminating pod after its preStop hook's grace period and copies an extended resource of a node's
#: capacity to its allocatable, as a kubelet does (cluster/kwok.py), and the reference runs with GenericWorkload
ENVIRONMENT: Final[dict[str, str]] = {}

#: specs upstream passes here and kopf-scheduler does not yet, by what they need (each is an open issue): CI runs
#: every other [sig-scheduling] spec (:data:`CI`). None in v1.37.2: all 35 pass (the last two, pod-group
#: preemption, since issue 30)
KNOWN_FAILURES: Final[dict[str, str]] = {}


def _go_regexp_literal(text: str) -> str:
    """`text` as a Go (RE2) regular expression matching it literally (Python's re.escape escapes spaces, which
    Go refuses)."""
    return re.sub(r"([\\.+*?()|\[\]{}^$])", r"\\\1", text)


#: what CI runs: every [sig-scheduling] spec but :data:`KNOWN_FAILURES`
CI: Final = Selection(
    "ci", r"\[sig-scheduling\]", "|".join(_go_regexp_literal(name) for name in sorted(KNOWN_FAILURES))
)

#: Points at a folder with a prebuilt ``bin/e2e.test`` (what build.sh prints); no build then.
ENV_E2E_DIR: Final = "KOPF_SCHEDULER_E2E_DIR"
_SCHEDULER_NAME: Final = "default-scheduler"
_POLICY_CRD: Final = "schedulingpolicies.scheduling.kopf.dev"
_POLICY_API: Final = "scheduling.kopf.dev/v1alpha1"


@dataclass(frozen=True)
class E2eInstall:
    """A built e2e.test: ``ROOT/bin/e2e.test``."""

    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "e2e.test"

    def check(self) -> E2eInstall:
        if not os.access(self.binary, os.X_OK):
            raise BuildError(f"{self.root} has no executable bin/e2e.test")
        return self


def ensure_e2e(cache_dir: Path | None = None, *, env: dict[str, str] | None = None, echo: bool = True) -> E2eInstall:
    """Return the built e2e.test, building it first when the cache is cold (about 5 minutes on 2 cores once
    the control plane is built; the same module, so most packages are in Go's build cache).

    Like :func:`~kopf_scheduler.cluster.ensure_binaries`: $KOPF_SCHEDULER_E2E_DIR names a prebuilt copy.
    """
    environ = dict(os.environ if env is None else env)
    prebuilt = environ.get(ENV_E2E_DIR)
    if prebuilt and cache_dir is None:
        return E2eInstall(Path(prebuilt).expanduser().resolve()).check()
    script = controlplane_dir().parent / "e2e" / "build.sh"
    if not script.is_file():
        raise BuildError(f"cannot find {script}: run from a checkout of kopf-scheduler, or set ${ENV_E2E_DIR}")
    return E2eInstall(run_build_script(script, "e2e.test", cache_dir, environ, echo, prebuilt_env=ENV_E2E_DIR)).check()


@dataclass(frozen=True)
class SpecResult:
    """One spec of a run, as ginkgo's JSON report tells it."""

    name: str  #: the full text ginkgo prints, "[sig-scheduling] SchedulerPredicates [Serial] validates ..."
    state: str  #: passed, failed, skipped, pending, timedout, panicked, interrupted, aborted
    seconds: float
    failure: str = ""  #: the failure's message (first lines), when it failed

    @property
    def passed(self) -> bool:
        return self.state == "passed"

    @property
    def ran(self) -> bool:
        return self.state not in ("skipped", "pending")


def read_report(path: Path) -> list[SpecResult]:
    """The specs (``It`` nodes) of a ginkgo ``--ginkgo.json-report`` file; the suite's own setup nodes only
    when they failed (a failed SynchronizedBeforeSuite fails every spec without running it)."""
    results = []
    for suite in json.loads(path.read_text()):
        for spec in suite.get("SpecReports") or ():
            kind = spec.get("LeafNodeType", "")
            state = spec.get("State", "")
            if kind != "It" and state in ("passed", "skipped"):
                continue
            texts = [*(spec.get("ContainerHierarchyTexts") or ()), spec.get("LeafNodeText") or kind]
            name = " ".join(t for t in texts if t)
            failure = ((spec.get("Failure") or {}).get("Message") or "").strip()
            results.append(
                SpecResult(
                    name=name,
                    state=state,
                    seconds=float(spec.get("RunTime") or 0) / 1e9,
                    failure="\n".join(failure.splitlines()[:12]),
                )
            )
    return results


def _repo_root() -> Path:
    return controlplane_dir().parent.parent  # tools/controlplane -> the checkout


def _wait(
    what: str, predicate: Callable[[], bool], timeout: float, proc: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if proc is not None and proc.poll() is not None:
            raise ControlPlaneError(f"{what}: the process exited with status {proc.returncode}")
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"{what}: not after {timeout:.0f}s")
        time.sleep(0.2)


class _KopfScheduler:
    """kopf-scheduler serving ``default-scheduler`` with upstream's default profile, as users install it."""

    def __init__(self, cp: ControlPlane, log: Path, *, verbose: bool = False) -> None:
        self.cp = cp
        self.log = log
        self.verbose = verbose
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        root = _repo_root()
        kubectl = self.cp.kubectl
        kubectl("apply", "-f", str(root / "crds" / "schedulingpolicy.yaml"))
        kubectl("wait", "--for=condition=Established", f"crd/{_POLICY_CRD}", "--timeout=60s", timeout=70)
        kubectl("apply", "-f", str(root / "deploy" / "namespace.yaml"))
        kubectl("apply", "-f", str(root / "deploy" / "rbac.yaml"))
        policy = {
            "apiVersion": "scheduling.kopf.dev/v1alpha1",
            "kind": "SchedulingPolicy",
            "metadata": {"name": _SCHEDULER_NAME},
            "spec": {"schedulerName": _SCHEDULER_NAME},
        }
        self.cp.request("POST", paths.collection(_POLICY_API, "schedulingpolicies"), policy)
        kubeconfig = self.cp.service_account_kubeconfig("kopf-scheduler", "kopf-scheduler", expiration_seconds=86400)
        port = free_port()
        argv = [
            sys.executable,
            "-m",
            "kopf_scheduler.commands",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--secure-port",
            "0",
            "--insecure-port",  # plain HTTP on 127.0.0.1: /readyz for this runner, no credentials needed
            str(port),
            *(["--verbose"] if self.verbose else []),
        ]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(_repo_root() / "operator"), os.environ.get("PYTHONPATH", "")]),
        }
        with self.log.open("ab") as out:
            out.write(f"# {shlex.join(argv)}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/readyz", timeout=1) as resp:
                    return bool(resp.status == 200)
            except (OSError, urllib.error.HTTPError):
                return False

        _wait(f"kopf-scheduler ready (log {self.log})", ready, 60, self.proc)
        _wait(f"SchedulingPolicy {_SCHEDULER_NAME} accepted (log {self.log})", self._accepted, 60, self.proc)

    def _accepted(self) -> bool:
        obj: Any = self.cp.request("GET", paths.item(_POLICY_API, "schedulingpolicies", _SCHEDULER_NAME))
        conditions = (obj.get("status") or {}).get("conditions") or ()
        return any(c.get("type") == "Accepted" and c.get("status") == "True" for c in conditions)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)


def _system_daemonset(name: str) -> dict[str, Any]:
    labels = {"k8s-app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "kube-system", "labels": labels},
        "spec": {
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "priorityClassName": "system-node-critical",
                    "automountServiceAccountToken": False,
                    "terminationGracePeriodSeconds": 0,
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [{"name": name, "image": "registry.k8s.io/pause:3.10"}],
                },
            },
        },
    }


def start_system_daemonsets(cp: ControlPlane, nodes: int, timeout: float = 60.0) -> None:
    """Create :data:`SYSTEM_DAEMONSETS` and wait until each runs a pod on each of the `nodes` nodes."""
    for name in SYSTEM_DAEMONSETS:
        cp.request("POST", paths.collection("apps/v1", "daemonsets", namespace="kube-system"), _system_daemonset(name))

    def running() -> bool:
        pods: Any = cp.request("GET", paths.collection("v1", "pods", namespace="kube-system"))
        phases = [(p.get("status") or {}).get("phase") for p in pods.get("items", [])]
        return phases.count("Running") >= nodes * len(SYSTEM_DAEMONSETS)

    _wait(f"the kube-system DaemonSets running on {nodes} nodes", running, timeout)


def e2e_argv(
    install: E2eInstall, cp: ControlPlane, selection: Selection, report: Path, *, extra: Sequence[str] = ()
) -> list[str]:
    """The command line of one run: the admin kubeconfig, our kubectl, ginkgo's selection and JSON report."""
    argv = [
        str(install.binary),
        f"--kubeconfig={cp.kubeconfig}",
        f"--kubectl-path={cp.binary('kubectl')}",
        f"--ginkgo.focus={selection.focus}",
        f"--ginkgo.json-report={report}",
        "--ginkgo.no-color",
        "--ginkgo.v",  # each spec's name and steps as it runs, into e2e.log
        "--ginkgo.timeout=4h",
        "--minStartupPods=0",  # kube-system runs no pods here
        "--disable-log-dump",
        f"--report-dir={report.parent}",
    ]
    if selection.skip:
        argv.append(f"--ginkgo.skip={selection.skip}")
    return [*argv, *extra]


def run_suite(
    workdir: Path,
    scheduler: Scheduler,
    selection: Selection = CONFORMANCE,
    *,
    nodes: int = NODES,
    install: E2eInstall | None = None,
    extra_args: Sequence[str] = (),
    echo: Callable[[str], None] | None = None,
    verbose: bool = False,
) -> list[SpecResult]:
    """Run `selection` of e2e.test against `scheduler` on a fresh control plane in `workdir`; return the specs.

    Everything it starts is stopped before it returns. Logs stay in `workdir`: the control plane's and
    KWOK's, ``kopf-scheduler.log`` (or ``kube-scheduler.log``), ``e2e.log`` (e2e.test's output) and
    ``report.json`` (ginkgo's). `echo` gets e2e.test's output line by line while it runs.
    """
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    bin_dir = ensure_binaries()
    kwok_install = ensure_kwok()
    install = (install or ensure_e2e()).check()
    cp = ControlPlane(workdir / "cp", bin_dir=bin_dir, die_with_parent=True)
    ours: _KopfScheduler | None = None
    cp.up()
    try:
        kwok = Kwok(cp, install=kwok_install, log_level="WARN").start()
        names, _ = create_simulated_nodes(cp, nodes, cpu=NODE_CPU, memory=NODE_MEMORY)
        kwok.wait_nodes_ready(names, timeout=60)
        if scheduler == "kopf-scheduler":
            ours = _KopfScheduler(cp, workdir / "kopf-scheduler.log", verbose=verbose)
            ours.start()
        else:  # with the feature gates the API server and the controller manager run with (the Workload API)
            cp.start_kube_scheduler([f"--feature-gates={','.join(FEATURE_GATES)}"])
        start_system_daemonsets(cp, nodes)
        report = workdir / "report.json"
        report.unlink(missing_ok=True)
        argv = e2e_argv(install, cp, selection, report, extra=extra_args)
        log = workdir / "e2e.log"
        with log.open("wb") as out:
            out.write(f"# {shlex.join(argv)}\n".encode())
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                out.flush()
                if echo is not None:
                    echo(line.decode(errors="replace").rstrip("\n"))
            proc.wait()
        if not report.is_file():
            raise ControlPlaneError(f"e2e.test (exit status {proc.returncode}) wrote no report; see {log}")
        return read_report(report)
    finally:
        if ours is not None:
            ours.stop()
        cp.down()


def table(columns: Mapping[str, Iterable[SpecResult]]) -> list[tuple[str, dict[str, str]]]:
    """One row per spec name that ran in any column: (name, {column: passed/FAILED/-}), in name order."""
    by_column = {col: {r.name: r for r in results} for col, results in columns.items()}
    names = sorted({name for results in by_column.values() for name, r in results.items() if r.ran})
    rows = []
    for name in names:
        cells = {}
        for col, results in by_column.items():
            r = results.get(name)
            cells[col] = "-" if r is None or not r.ran else ("passed" if r.passed else r.state.upper())
        rows.append((name, cells))
    return rows
