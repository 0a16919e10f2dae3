"""Loading static or in-cluster credentials does not import the official ``kubernetes`` client (0.3-0.4 s of
imports, on the way from process start to the first bind); an exec plugin still works, importing it then.

A fresh interpreter: the test process has the client imported already (``import kopf`` imports it when installed).
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import textwrap
from pathlib import Path

from kopf_scheduler.cluster.certs import create_pki

PROGRAM = textwrap.dedent("""\
    import json, sys
    from kopf_scheduler.edge.credentials import load_credentials, ssl_context

    static, sa, plugin = sys.argv[1:4]
    seen = {}
    creds = load_credentials(static)
    ssl_context(creds)
    seen["static"] = [creds.certificate_data is not None, "kubernetes" in sys.modules]
    environ = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "6443"}
    creds = load_credentials(environ=environ, home=sa, service_account_dir=sa)
    seen["in-cluster"] = [creds.server, creds.token.current(), "kubernetes" in sys.modules]
    creds = load_credentials(plugin)
    seen["exec"] = [creds.token.current(), "kubernetes" in sys.modules]
    print(json.dumps(seen))
""")


def config(path: Path, cluster: dict[str, object], user: dict[str, object]) -> Path:
    path.write_text(
        json.dumps(
            {
                "current-context": "ctx",
                "clusters": [{"name": "c", "cluster": cluster}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "users": [{"name": "u", "user": user}],
            }
        )
    )
    return path


def test_static_and_in_cluster_credentials_do_not_import_the_kubernetes_client(tmp_path: Path) -> None:
    pki = create_pki(tmp_path / "pki")

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    cluster = {"server": "https://127.0.0.1:6443", "certificate-authority-data": b64(pki.ca.cert)}
    static = config(
        tmp_path / "static",
        cluster,
        {"client-certificate-data": b64(pki.admin.cert), "client-key-data": b64(pki.admin.key)},
    )
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token")
    (sa / "ca.crt").write_bytes(pki.ca.cert.read_bytes())
    credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": "t"}}
    (tmp_path / "plugin.py").write_text(f"print({json.dumps(credential)!r})\n")
    exec_ = {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable, "args": ["plugin.py"]}
    plugin = config(tmp_path / "plugin", cluster, {"exec": exec_})
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, str(static), str(sa), str(plugin)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "static": [True, False],
        "in-cluster": ["https://[fd00::1]:6443", "sa-token", False],
        "exec": ["t", True],
    }
