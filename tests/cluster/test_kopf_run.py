"""The development entry the README gives, ``kopf run -m kopf_scheduler.kube.main -A --standalone``:
it logs in from $KUBECONFIG, lists and watches through the informers, accepts a policy and binds
its pods. On a control plane of its own: it serves every policy it sees, the other tests' too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from kube_helpers import ROOT, create_nodes, create_policy, make_pod_body, wait_accepted, wait_for
from kubernetes import client, config

from kopf_scheduler.cluster import ControlPlane, free_port

pytestmark = pytest.mark.cluster


def test_kopf_run_of_the_main_module_schedules(tmp_path: Path) -> None:
    with ControlPlane(tmp_path / "cp", die_with_parent=True) as cp:
        cp.kubectl("apply", "-f", str(ROOT / "crds" / "schedulingpolicy.yaml"))
        cp.kubectl("wait", "--for=condition=Established", "crd/schedulingpolicies.scheduling.kopf.dev", "--timeout=60s")
        api = config.new_client_from_config(str(cp.kubeconfig))
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        create_nodes(api, 2)
        create_policy(custom, "dev", {"schedulerName": "dev"})
        env = {
            **os.environ,
            "KUBECONFIG": str(cp.kubeconfig),
            "PYTHONPATH": os.pathsep.join([str(ROOT / "operator"), os.environ.get("PYTHONPATH", "")]),
        }
        log = tmp_path / "kopf-run.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kopf", "run", "-m", "kopf_scheduler.kube.main", "-A", "--standalone"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=ROOT,
            )
        try:
            wait_accepted(custom, "dev", None)
            core.create_namespaced_pod("default", make_pod_body("p", scheduler_name="dev"))
            node = wait_for(
                lambda: core.read_namespaced_pod("p", "default").spec.node_name, timeout=30, message="p bound"
            )
            assert node in ("node-0", "node-1")
            assert "Traceback" not in log.read_text(errors="replace")
        except BaseException:
            print(log.read_text(errors="replace")[-4000:], file=sys.stderr)
            raise
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
            api.close()


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 12
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      schedulerName: kopf-scheduler
      containers:
        - {name: web, image: registry.k8s.io/pause:3.10, resources: {requests: {cpu: 100m, memory: 64Mi}}}
"""


def test_a_deployment_runs_on_cluster_up_with_kopf_run(tmp_path: Path) -> None:
    """What the README tells a developer: ``kopf-scheduler cluster up --nodes 5``, ``kopf run -m
    kopf_scheduler.kube.main -A --standalone``, then a Deployment naming our scheduler: the controller
    manager's ReplicaSet controller makes the pods, we place them, KWOK runs them. ``kubectl kopf-scheduler
    explain --endpoint`` asks the local operator's port, which kopf run serves too."""
    workdir = tmp_path / "cluster"
    port = free_port()
    env = {
        **os.environ,
        "KOPF_SCHEDULER_METRICS_PORT": str(port),
        "KUBECONFIG": str(workdir / "kubeconfig"),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "operator"), os.environ.get("PYTHONPATH", "")]),
    }
    proc: subprocess.Popen[bytes] | None = None
    log = tmp_path / "kopf-run.log"
    try:
        up = subprocess.run(
            [
                sys.executable,
                "-m",
                "kopf_scheduler.commands",
                "cluster",
                "up",
                "--workdir",
                str(workdir),
                "--nodes",
                "5",
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert up.returncode == 0, up.stderr
        cp = ControlPlane(workdir)
        cp.kubectl("apply", "-f", str(ROOT / "crds" / "schedulingpolicy.yaml"))
        cp.kubectl("wait", "--for=condition=Established", "crd/schedulingpolicies.scheduling.kopf.dev", "--timeout=60s")
        cp.kubectl("apply", "-f", str(ROOT / "deploy" / "policies" / "default.yaml"))
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kopf", "run", "-m", "kopf_scheduler.kube.main", "-A", "--standalone"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=tmp_path,
            )
        manifest = tmp_path / "web.yaml"
        manifest.write_text(DEPLOYMENT)
        cp.kubectl("apply", "-f", str(manifest))
        api = config.new_client_from_config(str(cp.kubeconfig))
        core = client.CoreV1Api(api)

        def running() -> list[client.V1Pod]:
            pods = core.list_namespaced_pod("default", label_selector="app=web").items
            return pods if len(pods) == 12 and all(p.status.phase == "Running" for p in pods) else []

        pods = wait_for(running, timeout=90, interval=0.5, message="12 Running pods of Deployment web")
        assert {p.spec.node_name for p in pods} <= {f"kwok-node-{i}" for i in range(5)}
        assert all(p.metadata.owner_references[0].kind == "ReplicaSet" for p in pods)

        def scheduled() -> dict[str, str]:
            events = core.list_namespaced_event("default", field_selector="reason=Scheduled").items
            by_pod = {e.involved_object.name: e.message for e in events}
            return by_pod if all(p.metadata.name in by_pod for p in pods) else {}

        by_pod = wait_for(scheduled, timeout=30, message="a Scheduled event for each pod")
        for pod in pods:
            assert (
                by_pod[pod.metadata.name]
                == f"Successfully assigned default/{pod.metadata.name} to {pod.spec.node_name}"
            )

        pod = pods[0].metadata.name
        explained = subprocess.run(
            [sys.executable, "-m", "kopf_scheduler.commands.kubectl", "explain", f"default/{pod}"]
            + ["--endpoint", f"http://127.0.0.1:{port}"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert explained.returncode == 0, explained.stderr
        assert f"pod default/{pod}: scheduled to {pods[0].spec.node_name}" in explained.stdout
        nowhere = subprocess.run(  # no Lease, no operator pod, no --endpoint: the error says what to give
            [sys.executable, "-m", "kopf_scheduler.commands.kubectl", "explain", f"default/{pod}"],
            env={k: v for k, v in env.items() if k != "KOPF_SCHEDULER_ENDPOINT"},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert nowhere.returncode == 1 and "no leader in Lease" in nowhere.stderr and "--endpoint" in nowhere.stderr
        assert "Traceback" not in log.read_text(errors="replace")
        api.close()
    except BaseException:
        print(log.read_text(errors="replace")[-4000:] if log.exists() else "(no log)", file=sys.stderr)
        raise
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        ControlPlane(workdir).down()
