"""The one credential loader (``edge/credentials.py``) on temporary files: which source wins, what each
kubeconfig form gives (read by us, compared with the official client's loader; exec plugins and
auth-providers through that loader), exec plugins run and re-run, a token file re-read when the kubelet
rotates it, and what the clients build from the result."""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import shutil
import ssl
import sys
import tempfile
import textwrap
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

from kopf_scheduler.cluster.certs import Pki, create_pki
from kopf_scheduler.cluster.controlplane import write_kubeconfig
from kopf_scheduler.edge.blocking import BlockingApi
from kopf_scheduler.edge.credentials import (
    STALE_SKEW,
    CredentialsError,
    PluginToken,
    StaticToken,
    TokenFile,
    load_credentials,
    ssl_context,
)


def kubeconfig(
    path: Path,
    server: str,
    *,
    user: dict[str, Any] | None = None,
    cluster: dict[str, Any] | None = None,
    current: str | None = "ctx",
    context: dict[str, Any] | None = None,
) -> Path:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": "u", "user": user if user is not None else {"token": f"token-for-{server}"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u", **(context or {})}}],
    }
    if current is not None:
        doc["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class WallClock:
    """The real UTC time, moved on by `offset` (exec plugins stamp their expiry with the real time)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return create_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The process's temporary folder for this test: what stays there after loading is a leak."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


# --------------------------------------------------------------------------- where credentials come from


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Any]:
    """One of each source, each naming its own server; the test picks which exist."""
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token\n")
    (sa / "ca.crt").write_text("not parsed by the loader, only required\n")
    (sa / "namespace").write_text("kopf-scheduler")
    return {
        "flag": kubeconfig(tmp_path / "flag.yaml", "https://flag:6443"),
        "env": kubeconfig(tmp_path / "env.yaml", "https://env:6443"),
        "home": tmp_path / "home",
        "sa": sa,
        "cluster_env": {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"},
    }


@pytest.mark.parametrize(
    ("flag", "env", "home", "in_cluster", "source", "server"),
    [
        pytest.param(
            True, True, True, True, "--kubeconfig", "https://flag:6443", id="--kubeconfig wins over everything"
        ),
        pytest.param(
            False, True, True, True, "$KUBECONFIG", "https://env:6443", id="then $KUBECONFIG, even inside a pod"
        ),
        pytest.param(False, False, True, True, "~/.kube/config", "https://home:6443", id="then ~/.kube/config"),
        pytest.param(
            False, False, False, True, "in-cluster", "https://10.0.0.1:443", id="then the in-cluster ServiceAccount"
        ),
    ],
)
def test_precedence(
    places: dict[str, Any], flag: bool, env: bool, home: bool, in_cluster: bool, source: str, server: str
) -> None:
    if home:
        kubeconfig(places["home"] / ".kube" / "config", "https://home:6443")
    environ = dict(places["cluster_env"]) if in_cluster else {}
    if env:
        environ["KUBECONFIG"] = str(places["env"])
    creds = load_credentials(
        str(places["flag"]) if flag else None,
        environ=environ,
        home=str(places["home"]),
        service_account_dir=str(places["sa"]),
    )
    assert creds.source.startswith(source) and creds.server == server


def test_in_cluster_reads_the_service_account_files(places: dict[str, Any]) -> None:
    creds = load_credentials(
        environ=places["cluster_env"], home=str(places["home"]), service_account_dir=str(places["sa"])
    )
    assert creds.ca_path == str(places["sa"] / "ca.crt")
    assert creds.namespace == "kopf-scheduler"
    assert isinstance(creds.token, TokenFile) and creds.token.current() == "sa-token"


def test_in_cluster_ipv6_host_is_bracketed(places: dict[str, Any]) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    assert (
        load_credentials(environ=environ, home=str(places["home"]), service_account_dir=str(places["sa"])).server
        == "https://[fd00::1]:443"
    )


@pytest.mark.parametrize(
    ("host", "server"),
    [
        pytest.param("10.0.0.1", "https://10.0.0.1:443", id="IPv4"),
        pytest.param("kubernetes.default.svc", "https://kubernetes.default.svc:443", id="a name"),
        pytest.param("fe80::1%eth0", "https://[fe80::1%eth0]:443", id="IPv6 with a zone"),
    ],
)
def test_in_cluster_host_and_port_are_joined_as_go_does(places: dict[str, Any], host: str, server: str) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": "443"}
    creds = load_credentials(environ=environ, home=str(places["home"]), service_account_dir=str(places["sa"]))
    assert (creds.server, creds.source) == (server, "in-cluster")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(lambda sa: (sa / "token").unlink(), "Service token file does not exist", id="no token file"),
        pytest.param(lambda sa: (sa / "token").write_text(""), "Service token file is empty", id="an empty token"),
        pytest.param(lambda sa: (sa / "ca.crt").write_text(""), "Service certification file is empty", id="empty CA"),
    ],
)
def test_in_cluster_without_a_usable_token_or_ca_says_which(
    places: dict[str, Any], change: Callable[[Path], None], message: str
) -> None:
    change(places["sa"])
    with pytest.raises(CredentialsError, match=rf"^in-cluster: {message}.* \(in {re.escape(str(places['sa']))}\)$"):
        load_credentials(environ=places["cluster_env"], home=str(places["home"]), service_account_dir=str(places["sa"]))


def test_in_cluster_without_its_ca_says_so(places: dict[str, Any]) -> None:
    (places["sa"] / "ca.crt").unlink()
    with pytest.raises(CredentialsError, match=r"^in-cluster: Service certification file does not exist"):
        load_credentials(environ=places["cluster_env"], home=str(places["home"]), service_account_dir=str(places["sa"]))


def test_nothing_anywhere_says_where_it_looked(places: dict[str, Any]) -> None:
    with pytest.raises(
        CredentialsError, match=r"no --kubeconfig, \$KUBECONFIG or ~/.kube/config, and not in a cluster"
    ):
        load_credentials(environ={}, home=str(places["home"]), service_account_dir=str(places["sa"]))


def test_kubeconfig_list_merges_first_file_wins_and_skips_missing_files(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "a.yaml", "https://first:6443", user={"token": "first-token"})
    second = tmp_path / "b.yaml"
    second.write_text(
        json.dumps(
            {
                # ignored: the first file set one (the official merger alone would take this)
                "current-context": "other",
                "clusters": [
                    {"name": "c", "cluster": {"server": "https://second:6443"}},
                    {"name": "extra", "cluster": {"server": "x"}},
                ],
                "users": [{"name": "u", "user": {"token": "second-token"}}],
            }
        )
    )
    environ = {"KUBECONFIG": os.pathsep.join([str(tmp_path / "missing.yaml"), str(first), str(second)])}
    creds = load_credentials(environ=environ, home=str(tmp_path))
    assert (creds.server, creds.token and creds.token.current()) == ("https://first:6443", "first-token")


def test_kubeconfig_list_merges_each_name_from_the_first_file_that_defines_it(tmp_path: Path) -> None:
    """The first file sets no current-context and lacks the context and the user: they come from the later files,
    the cluster (defined in all three) from the first; the second file's current-context is the first set."""
    (tmp_path / "a.yaml").write_text(
        yaml.safe_dump({"clusters": [{"name": "c", "cluster": {"server": "https://first:6443"}}]})
    )
    (tmp_path / "b.yaml").write_text(
        yaml.safe_dump(
            {
                "current-context": "b-ctx",
                "clusters": [{"name": "c", "cluster": {"server": "https://second:6443"}}],
                "contexts": [{"name": "b-ctx", "context": {"cluster": "c", "user": "u", "namespace": "from-b"}}],
            }
        )
    )
    (tmp_path / "c.yaml").write_text(
        yaml.safe_dump(
            {
                "current-context": "c-ctx",
                "clusters": [{"name": "c", "cluster": {"server": "https://third:6443"}}],
                "contexts": [{"name": "b-ctx", "context": {"cluster": "c", "user": "u", "namespace": "from-c"}}],
                "users": [{"name": "u", "user": {"token": "third-token"}}],
            }
        )
    )
    environ = {"KUBECONFIG": os.pathsep.join(str(tmp_path / f) for f in ("a.yaml", "b.yaml", "c.yaml"))}
    creds = load_credentials(environ=environ, home=str(tmp_path))
    assert (creds.server, creds.namespace, creds.token) == ("https://first:6443", "from-b", StaticToken("third-token"))


def test_each_entrys_relative_paths_are_relative_to_its_own_file(tmp_path: Path, pki: Pki) -> None:
    """A cluster in one folder's file, its user in another's: each one's paths from its own folder (kubectl)."""
    (tmp_path / "clusters").mkdir()
    (tmp_path / "users" / "tls").mkdir(parents=True)
    shutil.copy(pki.ca.cert, tmp_path / "clusters" / "ca.crt")
    shutil.copy(pki.admin.cert, tmp_path / "users" / "tls" / "admin.crt")
    shutil.copy(pki.admin.key, tmp_path / "users" / "tls" / "admin.key")
    (tmp_path / "clusters" / "config").write_text(
        yaml.safe_dump(
            {
                "current-context": "ctx",
                "clusters": [{"name": "c", "cluster": {"server": "https://s:6443", "certificate-authority": "ca.crt"}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "admin"}}],
            }
        )
    )
    user = {"client-certificate": "tls/admin.crt", "client-key": "tls/admin.key"}
    (tmp_path / "users" / "config").write_text(yaml.safe_dump({"users": [{"name": "admin", "user": user}]}))
    environ = {
        "KUBECONFIG": os.pathsep.join([str(tmp_path / "clusters" / "config"), str(tmp_path / "users" / "config")])
    }
    creds = load_credentials(environ=environ, home=str(tmp_path))
    assert (creds.ca_path, creds.certificate_path, creds.private_key_path) == (
        str(tmp_path / "clusters" / "ca.crt"),
        str(tmp_path / "users" / "tls" / "admin.crt"),
        str(tmp_path / "users" / "tls" / "admin.key"),
    )
    assert (creds.ca_data, creds.certificate_data, creds.private_key_data) == (None, None, None)
    ssl_context(creds)  # the pair loads


def test_relative_paths_are_relative_to_the_kubeconfig_and_a_token_file_wins_over_a_token(tmp_path: Path) -> None:
    (tmp_path / "conf" / "secrets").mkdir(parents=True)
    (tmp_path / "conf" / "secrets" / "token").write_text("from-file")
    (tmp_path / "conf" / "secrets" / "ca.crt").write_text("the loader checks it exists\n")
    path = kubeconfig(
        tmp_path / "conf" / "config",
        "https://s:6443/",
        cluster={"certificate-authority": "secrets/ca.crt"},
        user={"token": "literal", "tokenFile": "secrets/token"},
        context={"namespace": "team"},
    )
    creds = load_credentials(str(path))
    assert creds.ca_path == str(tmp_path / "conf" / "secrets" / "ca.crt") and creds.ca_data is None
    assert isinstance(creds.token, TokenFile) and creds.token.current() == "from-file"
    assert (creds.server, creds.namespace) == ("https://s:6443", "team")


def test_a_literal_token_is_static(tmp_path: Path) -> None:
    creds = load_credentials(str(kubeconfig(tmp_path / "config", "https://s:6443", user={"token": "t"})))
    assert creds.token == StaticToken("t")
    assert (creds.token.current(), creds.token.stale(), creds.token.refresh(), creds.token.expiration) == (
        "t",
        False,
        False,
        None,
    )


def test_no_user_at_all_is_anonymous(tmp_path: Path) -> None:
    creds = load_credentials(str(kubeconfig(tmp_path / "config", "http://s:8080", user={})))
    assert (creds.server, creds.token, creds.certificate_data) == ("http://s:8080", None, None)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(dict(current=None), "no current-context", id="no current context"),
        pytest.param(dict(current="nope"), "current-context 'nope' is not defined", id="current context undefined"),
        pytest.param(dict(server=None), "its cluster has no server", id="a cluster without a server"),
        pytest.param(
            dict(user={"auth-provider": {"name": "azure", "config": {}}}),
            "auth-provider 'azure' is not supported .*kubelogin",
            id="azure is gone from the client",
        ),
        pytest.param(
            dict(user={"auth-provider": {"name": "oidc", "config": {"id-token": "not-a-jwt"}}}),
            "auth-provider 'oidc' gave no token",
            id="an oidc id-token that is no JWT",
        ),
        pytest.param(
            dict(user={"username": "a", "password": "b"}),
            "basic auth .* is not supported: kube-apiserver dropped it in v1.19",
            id="basic auth is refused",
        ),
        pytest.param(
            dict(user={"exec": {"command": "x"}}),
            "exec plugin 'x' failed: exec: malformed request. missing key 'apiVersion'",
            id="an exec plugin without apiVersion",
        ),
        pytest.param(
            dict(user={"client-certificate": "c.crt"}),
            "File does not exist: .*c.crt",
            id="a certificate file that is not there",
        ),
        pytest.param(
            dict(user={"client-key-data": base64.b64encode(b"-----BEGIN KEY-----").decode()}),
            "needs its key and a key its certificate",
            id="a key without its certificate",
        ),
        pytest.param(
            dict(user={"client-certificate-data": "!!!", "client-key-data": "!!!"}),
            "is not PEM",
            id="embedded data that is not base64 of a PEM",
        ),
        pytest.param(
            dict(user={"tokenFile": "/nonexistent/token"}),
            "No such file or directory: '/nonexistent/token'",
            id="a token file that is not there",
        ),
    ],
)
def test_unusable_kubeconfigs_are_refused_with_a_reason(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    server = change.pop("server", "https://s:6443")
    path = kubeconfig(tmp_path / "config", server, **change)
    if server is None:
        doc = json.loads(path.read_text())
        del doc["clusters"][0]["cluster"]["server"]
        path.write_text(json.dumps(doc))
    with pytest.raises(CredentialsError, match=f"^--kubeconfig {path}: .*{message}"):
        load_credentials(str(path))


def test_missing_or_broken_files_named_explicitly_are_errors(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match="no such file"):
        load_credentials(str(tmp_path / "nope"))
    with pytest.raises(CredentialsError, match=r"^\$KUBECONFIG: names no existing file"):
        load_credentials(environ={"KUBECONFIG": str(tmp_path / "nope")}, home=str(tmp_path))
    (tmp_path / "empty").write_text("")
    with pytest.raises(CredentialsError, match="is empty"):
        load_credentials(str(tmp_path / "empty"))
    (tmp_path / "list").write_text("[1, 2]")
    with pytest.raises(CredentialsError, match=f"^--kubeconfig {tmp_path / 'list'}: "):
        load_credentials(str(tmp_path / "list"))


# --------------------------------------------------------------------------- TLS material


def test_embedded_client_certificates_load_into_the_tls_context_and_leave_no_file(
    tmp_path: Path, pki: Pki, scratch: Path
) -> None:
    path = write_kubeconfig(
        tmp_path / "admin.kubeconfig",
        server="https://127.0.0.1:1",
        ca_cert=pki.ca.cert,
        user="admin",
        client_cert=pki.admin,
    )
    creds = load_credentials(str(path))
    assert (creds.certificate_data, creds.private_key_data) == (pki.admin.cert.read_bytes(), pki.admin.key.read_bytes())
    assert (creds.ca_data, creds.ca_path, creds.certificate_path, creds.token) == (
        pki.ca.cert.read_bytes(),
        None,
        None,
        None,
    )
    ctx = ssl_context(creds)
    assert ctx.verify_mode is ssl.CERT_REQUIRED and len(ctx.get_ca_certs()) == 1
    assert not list(scratch.iterdir())  # what the official loader wrote for *-data, and the key for ssl, are gone


def test_data_wins_over_a_path_even_when_empty_as_in_the_official_loader(tmp_path: Path, pki: Pki) -> None:
    user = {
        "client-certificate-data": b64(pki.admin.cert),
        "client-certificate": "nowhere.crt",  # not read: the data wins
        "client-key-data": b64(pki.admin.key),
        "client-key": "nowhere.key",
    }
    cluster = {"certificate-authority-data": "", "certificate-authority": "nowhere-ca.crt"}  # empty: no CA at all
    creds = load_credentials(str(kubeconfig(tmp_path / "config", "https://s:6443", user=user, cluster=cluster)))
    assert (creds.certificate_data, creds.private_key_data) == (pki.admin.cert.read_bytes(), pki.admin.key.read_bytes())
    assert (creds.certificate_path, creds.private_key_path, creds.ca_path, creds.ca_data) == (None, None, None, None)


def test_plain_http_takes_no_tls_material(tmp_path: Path) -> None:
    """As in the official loader, the CA and the client certificate are read for an https server only."""
    user = {"client-certificate": "missing.crt", "client-key": "missing.key", "token": "t"}
    creds = load_credentials(
        str(kubeconfig(tmp_path / "config", "http://s:8080", user=user, cluster={"certificate-authority": "x"}))
    )
    assert (creds.ca_path, creds.certificate_path, creds.private_key_path, creds.token) == (
        None,
        None,
        None,
        StaticToken("t"),
    )


STATIC_USERS: dict[str, dict[str, Any]] = {
    "a token": {"token": "abc.def"},
    "a token that starts with Bearer": {"token": "Bearer abc"},
    "a token file": {"tokenFile": "token"},
    "certificate and key by path": {"client-certificate": "pki/admin.crt", "client-key": "pki/admin.key"},
    "certificate and key as data": {"client-certificate-data": "CERT", "client-key-data": "KEY"},
    "data beside a path": {"client-certificate-data": "CERT", "client-certificate": "gone", "client-key-data": "KEY"},
    "empty data beside a path": {"client-certificate-data": "", "client-certificate": "pki/admin.crt"},
    "nobody": {},
}
STATIC_CLUSTERS: dict[str, dict[str, Any]] = {
    "a CA by path": {"certificate-authority": "pki/ca.crt"},
    "a CA as data, a name and a proxy": {
        "certificate-authority-data": "CA",
        "tls-server-name": "kubernetes",
        "proxy-url": "http://proxy:3128",
    },
    "insecure": {"insecure-skip-tls-verify": True},
    "insecure false": {"insecure-skip-tls-verify": False, "certificate-authority": "pki/ca.crt"},
}


@pytest.mark.parametrize("user", STATIC_USERS, ids=list(STATIC_USERS))
@pytest.mark.parametrize("cluster", STATIC_CLUSTERS, ids=list(STATIC_CLUSTERS))
@pytest.mark.parametrize("server", ["https://s:6443/", "http://s:8080"])
def test_static_kubeconfigs_read_as_the_official_loader_reads_them(
    tmp_path: Path, pki: Pki, user: str, cluster: str, server: str
) -> None:
    """Our reading of a user without a plugin against the official client's ``KubeConfigLoader`` on the same file:
    server, CA, client certificate and key (as paths, or as the PEM it wrote to files for data), TLS verification,
    server name, proxy and token. (Not compared here, on purpose: a ``tokenFile`` beside a ``token`` wins, as in
    client-go, where the official loader takes the token: tested above.)"""
    from kubernetes.client import Configuration
    from kubernetes.config.kube_config import KubeConfigLoader, KubeConfigMerger

    (tmp_path / "pki").mkdir()
    for source, name in ((pki.ca.cert, "ca.crt"), (pki.admin.cert, "admin.crt"), (pki.admin.key, "admin.key")):
        shutil.copy(source, tmp_path / "pki" / name)
    (tmp_path / "token").write_text("from-the-file")
    data = {"CERT": b64(pki.admin.cert), "KEY": b64(pki.admin.key), "CA": b64(pki.ca.cert)}

    def filled(entry: dict[str, Any]) -> dict[str, Any]:
        return {k: data.get(v, v) if k.endswith("-data") else v for k, v in entry.items()}

    path = kubeconfig(
        tmp_path / "config", server, user=filled(STATIC_USERS[user]), cluster=filled(STATIC_CLUSTERS[cluster])
    )
    ours = load_credentials(str(path))

    official = Configuration()
    loader = KubeConfigLoader(KubeConfigMerger(str(path)).config, config_base_path=None, temp_file_path=tmp_path / "t")
    loader.load_and_set(official)

    def material(path_: str | None, data_: bytes | None) -> bytes | None:
        return Path(path_).read_bytes() if path_ else data_

    assert ours.server == official.host
    assert material(ours.ca_path, ours.ca_data) == material(official.ssl_ca_cert, None)
    assert material(ours.certificate_path, ours.certificate_data) == material(official.cert_file, None)
    assert material(ours.private_key_path, ours.private_key_data) == material(official.key_file, None)
    assert (ours.insecure, ours.tls_server_name, ours.proxy_url) == (
        not official.verify_ssl,
        official.tls_server_name,
        official.proxy,
    )
    bearer = official.api_key.get("BearerToken")
    assert (f"Bearer {ours.token.current()}" if ours.token else None) == bearer
    for key in ("ca", "certificate", "private_key"):  # a path is the user's own file, never one written for data
        assert getattr(ours, f"{key}_path") is None or str(tmp_path / "t") not in str(getattr(ours, f"{key}_path"))


def test_insecure_skip_tls_verify_turns_verification_off(tmp_path: Path) -> None:
    creds = load_credentials(
        str(kubeconfig(tmp_path / "config", "https://s:6443", cluster={"insecure-skip-tls-verify": True}))
    )
    assert creds.insecure
    ctx = ssl_context(creds)
    assert (ctx.verify_mode, ctx.check_hostname) == (ssl.CERT_NONE, False)


def test_tls_server_name_and_proxy_url_are_kept(tmp_path: Path) -> None:
    cluster = {"tls-server-name": "api.internal", "proxy-url": "http://proxy:3128"}
    creds = load_credentials(str(kubeconfig(tmp_path / "config", "https://10.1.2.3:6443", cluster=cluster)))
    assert (creds.tls_server_name, creds.proxy_url) == ("api.internal", "http://proxy:3128")


# --------------------------------------------------------------------------- exec plugins

#: an exec credential plugin, a POSIX shell script (it starts in a millisecond, as a compiled plugin does; a Python
#: one takes 40 ms): what it prints is set by the file $1 (shell assignments, see ``Plugin.spec``); $2 counts its runs
PLUGIN = textwrap.dedent(r"""
    . "$1"
    n=$(( $(cat "$2" 2>/dev/null || echo 0) + 1 ))
    echo "$n" > "$2"
    if [ -n "$FAIL" ]; then
        echo "$FAIL" >&2
        exit 3
    fi
    if [ -n "$STATUS" ]; then
        status=$STATUS
    else
        status="\"token\":\"${TOKEN:-token-$n}\""
    fi
    if [ -n "$TTL" ]; then
        expiry=$(date -u -d "@$(( $(date +%s) + TTL ))" +%Y-%m-%dT%H:%M:%SZ)
        status="$status,\"expirationTimestamp\":\"$expiry\""
    fi
    printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{%s}}\n' "$status"
""")
SHELL = "/bin/sh"


class Plugin:
    """The plugin's files: `spec` says what its next run prints, `runs` how often it ran."""

    def __init__(self, tmp_path: Path) -> None:
        self.script = tmp_path / "plugin.sh"
        self.script.write_text(PLUGIN)
        self.spec_path = tmp_path / "spec.sh"
        self.runs_path = tmp_path / "runs"

    def spec(self, *, fail: str = "", token: str = "", ttl: int = 0, cert: str = "", key: str = "") -> None:
        """The next runs fail with `fail` on stderr, or print `token` (else token-<run>) or the client
        certificate and key in the files `cert` and `key`, expiring `ttl` seconds after the run (0: never)."""
        status = ""
        if cert:
            status = f'"clientCertificateData":{json.dumps(Path(cert).read_text())},'
            status += f'"clientKeyData":{json.dumps(Path(key).read_text())}'
        assignments = {"FAIL": fail, "TOKEN": token, "TTL": str(ttl) if ttl else "", "STATUS": status}
        self.spec_path.write_text("".join(f"{k}={shlex.quote(v)}\n" for k, v in assignments.items()))

    @property
    def runs(self) -> int:
        return int(self.runs_path.read_text()) if self.runs_path.exists() else 0

    def user(self, **extra: Any) -> dict[str, Any]:
        return {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1", "interactiveMode": "Never",
            "command": SHELL, "args": [str(self.script), str(self.spec_path), str(self.runs_path)], **extra,
        }}  # fmt: skip


@pytest.fixture
def plugin(tmp_path: Path) -> Plugin:
    return Plugin(tmp_path)


def test_an_exec_token_is_refreshed_near_its_expiry_by_running_the_plugin_again(tmp_path: Path, plugin: Plugin) -> None:
    plugin.spec(ttl=60)
    clock, wall = Clock(), WallClock()
    creds = load_credentials(
        str(kubeconfig(tmp_path / "config", "https://s:6443", user=plugin.user())), clock=clock, wall_clock=wall
    )
    token = creds.token
    assert isinstance(token, PluginToken)
    assert (token.current(), plugin.runs) == ("token-1", 1)
    assert token.expiration is not None and timedelta(seconds=50) < token.expiration - datetime.now(UTC) <= timedelta(
        seconds=60
    )
    assert not token.stale() and plugin.runs == 1  # looking is free: the plugin ran once, at load

    wall.offset = timedelta(seconds=60) - STALE_SKEW  # 10 s before its expiry
    assert token.stale()
    plugin.spec(ttl=3600)
    assert token.refresh() is True and (token.current(), plugin.runs) == ("token-2", 2)
    clock.now += 1
    assert not token.stale()

    plugin.spec(token="token-2", ttl=3600)  # after a 401: the plugin runs even though nothing is stale
    assert token.refresh() is False and plugin.runs == 3


def test_a_plugin_that_keeps_giving_stale_tokens_runs_at_most_once_a_second(tmp_path: Path, plugin: Plugin) -> None:
    plugin.spec(ttl=5)  # always within the skew
    clock = Clock()
    creds = load_credentials(str(kubeconfig(tmp_path / "config", "https://s:6443", user=plugin.user())), clock=clock)
    assert creds.token is not None and creds.token.stale()
    assert creds.token.refresh() is True
    assert not creds.token.stale()  # it just tried
    clock.now += 1
    assert creds.token.stale()


def test_an_exec_token_without_expiry_is_never_stale(tmp_path: Path, plugin: Plugin) -> None:
    plugin.spec(token="forever")
    path = kubeconfig(tmp_path / "config", "https://s:6443", user=plugin.user())
    creds = load_credentials(str(path), wall_clock=lambda: datetime.max.replace(tzinfo=UTC))
    assert creds.token is not None and (creds.token.current(), creds.token.expiration, creds.token.stale()) == (
        "forever",
        None,
        False,
    )


def test_a_failing_plugin_is_an_error_at_load_and_a_false_refresh_later(tmp_path: Path, plugin: Plugin) -> None:
    path = kubeconfig(
        tmp_path / "config", "https://s:6443", user=plugin.user(installHint="install it with: pip install nothing")
    )
    plugin.spec(fail="no SSO session: run aws sso login")
    with pytest.raises(CredentialsError) as err:
        load_credentials(str(path))
    assert err.value.source == f"--kubeconfig {path}"
    assert err.value.reason == (
        f"user 'u': exec plugin {SHELL!r} failed: exec: process returned 3. no SSO session: run aws sso login "
        "(install it with: pip install nothing)"
    )

    plugin.spec(ttl=3600)
    creds = load_credentials(str(path))
    token = creds.token
    assert isinstance(token, PluginToken) and token.current() == "token-2"
    plugin.spec(fail="expired")
    assert token.refresh() is False and token.current() == "token-2"  # the last good token is kept
    assert token.error is not None and "process returned 3. expired" in token.error


def test_a_plugin_that_is_not_installed_says_so(tmp_path: Path) -> None:
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(tmp_path / "aws"),
            "installHint": "see aws.amazon.com/cli",
        }
    }
    with pytest.raises(
        CredentialsError, match=r"exec plugin '.*aws' failed: .*No such file or directory.* \(see aws.amazon.com/cli\)"
    ):
        load_credentials(str(kubeconfig(tmp_path / "config", "https://s:6443", user=user)))


def test_an_exec_plugin_may_give_a_client_certificate(tmp_path: Path, plugin: Plugin, pki: Pki, scratch: Path) -> None:
    plugin.spec(cert=str(pki.admin.cert), key=str(pki.admin.key))
    cluster = {"certificate-authority-data": b64(pki.ca.cert)}
    creds = load_credentials(
        str(kubeconfig(tmp_path / "config", "https://s:6443", user=plugin.user(), cluster=cluster))
    )
    assert (creds.certificate_data, creds.private_key_data, creds.token) == (
        pki.admin.cert.read_bytes(),
        pki.admin.key.read_bytes(),
        None,
    )
    ssl_context(creds)  # the pair loads
    assert not list(scratch.iterdir())


def test_the_plugin_runs_in_the_kubeconfigs_folder_with_its_env(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "p.py").write_text(
        textwrap.dedent("""\
        import json, os
        token = os.getcwd() + "|" + os.environ["REGION"] + "|" + json.loads(os.environ["KUBERNETES_EXEC_INFO"])["kind"]
        status = {"token": token}
        print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}))
    """)
    )
    env = [{"name": "REGION", "value": "eu"}]
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": ["p.py"],
            "env": env,
        }
    }
    creds = load_credentials(str(kubeconfig(tmp_path / "conf" / "config", "https://s:6443", user=user)))
    assert creds.token is not None and creds.token.current() == f"{tmp_path / 'conf'}|eu|ExecCredential"


# --------------------------------------------------------------------------- auth-provider


def jwt(**claims: Any) -> str:
    def part(obj: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    return f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def test_an_oidc_id_token_is_used_with_its_expiry(tmp_path: Path) -> None:
    exp = datetime(2099, 1, 1, tzinfo=UTC)
    id_token = jwt(iss="https://idp.example", sub="alice", exp=int(exp.timestamp()))
    provider = {
        "name": "oidc",
        "config": {"idp-issuer-url": "https://idp.example", "client-id": "kubernetes", "id-token": id_token},
    }
    creds = load_credentials(str(kubeconfig(tmp_path / "config", "https://s:6443", user={"auth-provider": provider})))
    token = creds.token
    assert isinstance(token, PluginToken)
    assert (token.current(), token.expiration, token.stale()) == (id_token, exp, False)


def test_a_gcp_access_token_in_the_file_is_used_until_it_expires(tmp_path: Path) -> None:
    expiry = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    provider = {
        "name": "gcp",
        "config": {"access-token": "ya29.token", "expiry": expiry.strftime("%Y-%m-%dT%H:%M:%SZ")},
    }
    creds = load_credentials(str(kubeconfig(tmp_path / "config", "https://s:6443", user={"auth-provider": provider})))
    assert creds.token is not None and (creds.token.current(), creds.token.expiration) == ("ya29.token", expiry)


# --------------------------------------------------------------------------- the token file


def test_token_file_is_re_read_when_it_changes_at_most_once_a_second(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("one\n")
    clock = Clock()
    token = TokenFile(str(path), clock=clock)
    assert token.current() == "one"
    path.write_text("two-rotated\n")  # another size: a change even within the mtime's resolution
    clock.now = 0.5
    assert token.current() == "one"  # looked less than a second ago
    clock.now = 1.0
    assert token.current() == "two-rotated"
    assert (token.stale(), token.expiration) == (False, None)


def test_token_file_refresh_after_a_401_reads_at_once_and_says_whether_it_changed(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("aaa")
    clock = Clock()
    token = TokenFile(str(path), clock=clock)
    assert token.refresh() is False  # nothing new: the request should not be retried
    path.write_text("bbb")  # same size, maybe the same mtime: refresh reads regardless
    assert token.refresh() is True and token.current() == "bbb"


def test_token_file_rotated_by_a_symlink_swap_as_the_kubelet_does(tmp_path: Path) -> None:
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "token").write_text("first")
    (tmp_path / "..data").symlink_to("v1")
    (tmp_path / "token").symlink_to("..data/token")
    clock = Clock()
    token = TokenFile(str(tmp_path / "token"), clock=clock)
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "token").write_text("later")
    (tmp_path / "..data_tmp").symlink_to("v2")
    os.replace(tmp_path / "..data_tmp", tmp_path / "..data")
    clock.now = 5.0
    assert token.current() == "later"


def test_token_file_mid_rotation_keeps_the_last_token(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("good")
    clock = Clock()
    token = TokenFile(str(path), clock=clock)
    path.write_text("")
    clock.now = 1.0
    assert token.current() == "good"
    path.unlink()
    clock.now = 2.0
    assert token.current() == "good"


def test_a_kubeconfig_token_file_is_watched_too(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("one")
    clock = Clock()
    creds = load_credentials(
        str(kubeconfig(tmp_path / "config", "https://s:6443", user={"tokenFile": "token"})), clock=clock
    )
    (tmp_path / "token").write_text("rotated")
    clock.now = 1.0
    assert creds.token is not None and creds.token.current() == "rotated"


# --------------------------------------------------------------------------- what the clients get


def test_kopf_can_be_given_every_field(tmp_path: Path, plugin: Plugin) -> None:
    """The operator builds Kopf's ConnectionInfo from these fields (edge/ imports no Kopf)."""
    plugin.spec(ttl=600)
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    cluster = {"certificate-authority-data": ca}
    path = kubeconfig(
        tmp_path / "config", "https://s:6443", cluster=cluster, user=plugin.user(), context={"namespace": "ns"}
    )
    creds = load_credentials(str(path))
    assert creds.token is not None
    info = kopf.ConnectionInfo(
        server=creds.server, ca_path=creds.ca_path, ca_data=creds.ca_data, insecure=creds.insecure or None,
        certificate_path=creds.certificate_path, certificate_data=creds.certificate_data,
        private_key_path=creds.private_key_path, private_key_data=creds.private_key_data,
        token=creds.token.current(), expiration=creds.token.expiration, default_namespace=creds.namespace,
        proxy_url=creds.proxy_url,
    )  # fmt: skip
    assert (info.server, info.ca_data, info.token, info.default_namespace) == (
        "https://s:6443",
        b"-----BEGIN CERTIFICATE-----\n",
        "token-1",
        "ns",
    )
    assert info.expiration == creds.token.expiration is not None


class _Echo(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        peer = self.connection.getpeercert()
        subject = dict(item for rdn in peer["subject"] for item in rdn) if peer else {}
        body = json.dumps(
            {"path": self.path, "authorization": self.headers.get("Authorization"), "client": subject.get("commonName")}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def tls_server(pki: Pki) -> Iterator[str]:
    """An HTTPS server on 127.0.0.2 (not among the serving certificate's names) that wants a client certificate."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca.cert))
    ctx.load_cert_chain(pki.serving.cert, pki.serving.key)
    ctx.verify_mode = ssl.CERT_REQUIRED
    server = ThreadingHTTPServer(("127.0.0.2", 0), _Echo)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.2:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_commands_client_talks_tls_with_the_kubeconfigs_ca_name_certificate_and_fresh_token(
    tmp_path: Path, pki: Pki, tls_server: str, plugin: Plugin
) -> None:
    """``BlockingApi`` (simulate --from-cluster, the kubectl plugin): the operator's client and loader."""
    plugin.spec(ttl=60)
    user = {**plugin.user(), "client-certificate-data": b64(pki.admin.cert), "client-key-data": b64(pki.admin.key)}
    cluster = {"certificate-authority-data": b64(pki.ca.cert), "tls-server-name": "kubernetes"}
    wall = WallClock()
    creds = load_credentials(
        str(kubeconfig(tmp_path / "config", tls_server, user=user, cluster=cluster)), wall_clock=wall
    )
    with BlockingApi(creds) as api:
        first = api.get("/version/")
        wall.offset = timedelta(seconds=55)  # stale: the next request's header comes from a new run
        second = api.get("/version/")
    assert first.body == {"path": "/version/", "authorization": "Bearer token-1", "client": "kopf-scheduler-admin"}
    assert second.body["authorization"] == "Bearer token-2" and plugin.runs == 2
