"""Which client the commands that talk to a cluster once (``simulate --from-cluster``, ``explain``, the
kubectl plugin) should use: import time and time to the first answer of a simple list, per client.

    python bench/bench_sync_clients.py                 # 5 fresh processes per client
    python bench/bench_sync_clients.py --runs 9 --pykube /tmp/pykube-target

A command runs once and exits, so what its user waits for is the interpreter starting, the client's
import, the kubeconfig's loading and one request: each run is a fresh ``python`` process that does
exactly that against a local control plane (etcd + kube-apiserver, admin kubeconfig with a client
certificate) and prints its own breakdown; the parent also times the whole process. Clients:

- ``kubernetes``: the official client, ``config.load_kube_config`` + ``CoreV1Api.list_node``
  (``_preload_content=False``, as ``edge/snapshot.py`` reads it);
- ``edge``: ours, ``edge/credentials.load_credentials`` (which imports the ``kubernetes`` package only
  for an ``exec`` or ``auth-provider`` user, not for this certificate) + ``edge/blocking.BlockingApi.get`` (``Api`` on a
  private loop), what ``simulate --from-cluster`` and the kubectl plugin use;
- ``pykube``: pykube-ng, ``KubeConfig.from_file`` + ``Node.objects(api)`` (requests underneath). It is
  not a dependency: pass ``--pykube DIR`` where it is installed (``pip install --no-deps --target DIR
  pykube-ng``; requests and PyYAML come with the official client).

Also ``python -X importtime``'s cumulative microseconds for each client's top import. Prints the
median of the runs. Absolute figures depend on the machine; the order is what matters.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from kopf_scheduler.cluster import bodies
from kopf_scheduler.cluster.build import ensure_binaries
from kopf_scheduler.cluster.controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[1]

#: per client: the import to time, then the program a run executes (KUBECONFIG in the environment)
PROGRAMS: dict[str, tuple[str, str]] = {
    "kubernetes": (
        "kubernetes.client",
        """
from kubernetes import client, config
t_import = time.perf_counter()
config.load_kube_config(os.environ["KUBECONFIG"])
api = client.CoreV1Api()
t_load = time.perf_counter()
response = api.list_node(_preload_content=False)
count = len(json.loads(response.data)["items"])
""",
    ),
    "edge": (
        "kopf_scheduler.edge.blocking",
        """
from kopf_scheduler.edge.blocking import BlockingApi
from kopf_scheduler.edge.credentials import load_credentials
t_import = time.perf_counter()
api = BlockingApi(load_credentials(os.environ["KUBECONFIG"]))
t_load = time.perf_counter()
count = len(api.get("/api/v1/nodes").body["items"])
api.close()
""",
    ),
    "pykube": (
        "pykube",
        """
import pykube
t_import = time.perf_counter()
api = pykube.HTTPClient(pykube.KubeConfig.from_file(os.environ["KUBECONFIG"]))
t_load = time.perf_counter()
count = len(list(pykube.Node.objects(api)))
""",
    ),
}

HARNESS = """
import json, os, sys, time
t0 = time.perf_counter()
{program}
t_answer = time.perf_counter()
print(json.dumps({{"import": t_import - t0, "load": t_load - t_import, "request": t_answer - t_load, "count": count}}))
"""


def run_once(name: str, env: dict[str, str]) -> dict[str, float]:
    code = HARNESS.format(program=PROGRAMS[name][1])
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    result["process"] = time.perf_counter() - started
    return result


def import_time(module: str, env: dict[str, str]) -> float:
    """``-X importtime``'s cumulative seconds for `module` (the line of the module imported)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"], env=env, capture_output=True, text=True
    )
    pattern = r"^import time:\s+\d+ \|\s+(\d+) \| " + re.escape(module) + "$"
    cumulative = [int(m.group(1)) for m in re.finditer(pattern, out.stderr, re.M)]
    return max(cumulative, default=0) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nodes", type=int, default=50)
    parser.add_argument("--pykube", type=Path, help="a directory where pykube-ng is installed (pip --target)")
    args = parser.parse_args()
    clients = [c for c in PROGRAMS if c != "pykube" or args.pykube]
    ensure_binaries()
    with (
        tempfile.TemporaryDirectory(prefix="kopf-scheduler-bench-") as tmp,
        ControlPlane(
            # clients are measured here, not scheduling: no controllers beside the API server to share the cores with
            Path(tmp),
            controller_manager=False,
        ) as cp,
    ):
        print("control plane: etcd and kube-apiserver, no kube-controller-manager (a client benchmark)")
        from kubernetes import client, config  # the parent only: seeds the nodes

        config.load_kube_config(str(cp.kubeconfig))
        core = client.CoreV1Api()
        for i in range(args.nodes):
            core.create_node(bodies.node_body(f"node-{i}").manifest())
        path = [str(ROOT / "operator"), *([str(args.pykube)] if args.pykube else [])]
        env = {**os.environ, "KUBECONFIG": str(cp.kubeconfig), "PYTHONPATH": os.pathsep.join(path)}
        baseline = statistics.median(_timed([sys.executable, "-c", "pass"], env) for _ in range(args.runs))
        print(f"{args.nodes} nodes; median of {args.runs} fresh processes; a bare `python -c pass`: {baseline:.3f} s")
        print(f"{'client':<11} {'-X importtime':>13} {'import':>8} {'kubeconfig':>10} {'list':>8} {'process':>8}")
        for name in clients:
            runs = [run_once(name, env) for _ in range(args.runs)]
            assert all(r["count"] == args.nodes for r in runs)
            med = {k: statistics.median(r[k] for r in runs) for k in ("import", "load", "request", "process")}
            imported = statistics.median(import_time(PROGRAMS[name][0], env) for _ in range(3))
            print(
                f"{name:<11} {imported:>12.3f}s {med['import']:>7.3f}s {med['load']:>9.3f}s "
                f"{med['request']:>7.3f}s {med['process']:>7.3f}s"
            )
    return 0


def _timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True)
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())
