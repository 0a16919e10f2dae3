"""Fixtures of the cluster tests: one real control plane (etcd + kube-apiserver + kube-controller-manager) per
test session.

Every test under tests/cluster/ is marked ``cluster``. The binaries are built before any test
runs when a *selected* test is marked ``cluster`` and they are missing (a cold build takes 10-30
minutes, longer than the per-test timeout). The hook runs last, after ``-m``/``-k`` deselection,
so ``pytest -m "not cluster"`` never builds or looks for Go. KWOK (the ``kwok`` fixture) and upstream's
e2e.test (the ``e2e_install`` fixture) are built the same way when a selected test uses them. A failing
build or start fails the run loudly; nothing is skipped.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kube_helpers import GROUP, PLURAL, ROOT, delete_namespace
from kubernetes import client, config

from kopf_scheduler.cluster import BuildError, ControlPlane, Kwok, ensure_binaries, ensure_kwok
from kopf_scheduler.cluster.e2e import E2eInstall, ensure_e2e

_HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test of this folder ``cluster`` (before ``-m`` deselects)."""
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.cluster)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Build (or find) the control-plane binaries, and KWOK when a selected test uses the ``kwok``
    fixture, once, outside any test's timeout."""
    if any(item.get_closest_marker("cluster") for item in session.items):
        try:
            ensure_binaries()
        except BuildError as exc:
            pytest.exit(f"cannot build the control plane for the `cluster` tests:\n{exc}", returncode=1)
    if any("kwok" in getattr(item, "fixturenames", ()) for item in session.items):
        try:
            ensure_kwok()
        except BuildError as exc:
            pytest.exit(f"cannot build KWOK for the tests that use it:\n{exc}", returncode=1)
    if any("e2e_install" in getattr(item, "fixturenames", ()) for item in session.items):
        try:
            ensure_e2e()
        except BuildError as exc:
            pytest.exit(f"cannot build upstream's e2e.test for the tests that use it:\n{exc}", returncode=1)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A running control plane for the whole session; always stopped, even after failures.

    Its processes also die with the pytest process (die_with_parent), so a
    killed run leaves nothing behind.
    """
    cp = ControlPlane(tmp_path_factory.mktemp("control-plane"), die_with_parent=True)
    cp.up()  # on failure it cleans up after itself and raises with the log tail
    try:
        yield cp
    finally:
        cp.down()


@pytest.fixture(scope="session")
def kwok(control_plane: ControlPlane) -> Iterator[Kwok]:
    """KWOK playing the kubelets of the session's KWOK nodes (``create_nodes(..., kwok=True)``):
    they become Ready, pods bound to them go Running, deleted ones go away. No heartbeats."""
    with Kwok(control_plane) as running:
        yield running


@pytest.fixture(scope="session")
def e2e_install() -> E2eInstall:
    """Upstream's e2e.test (tools/e2e/build.sh), built before the tests ran."""
    return ensure_e2e(echo=False)


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane) -> Path:
    """Path of the admin kubeconfig (system:masters)."""
    return control_plane.kubeconfig


@pytest.fixture(scope="session")
def api(kubeconfig: Path) -> Iterator[client.ApiClient]:
    """An admin `kubernetes.client.ApiClient` for the session's control plane."""
    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def namespace(api: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted with its pods afterwards."""
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    try:
        yield name
    finally:
        delete_namespace(api, name)


@pytest.fixture(scope="module")
def sa_kubeconfig(control_plane: ControlPlane) -> Path:
    control_plane.kubectl("apply", "-f", str(ROOT / "crds" / "schedulingpolicy.yaml"))
    control_plane.kubectl("wait", "--for=condition=Established", f"crd/{PLURAL}.{GROUP}", "--timeout=30s")
    control_plane.kubectl("apply", "-f", str(ROOT / "deploy" / "namespace.yaml"))
    control_plane.kubectl("apply", "-f", str(ROOT / "deploy" / "rbac.yaml"))
    return control_plane.service_account_kubeconfig("kopf-scheduler", "kopf-scheduler")


@pytest.fixture(scope="module")
def custom(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)
