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

from kopf_scheduler.cluster import ControlPlane

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
