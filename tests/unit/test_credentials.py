"""The one credential loader, with temporary files: which source wins, what a kubeconfig may say,
the in-cluster ServiceAccount, and a token file re-read when the kubelet rotates it."""

from __future__ import annotations

import base64
import json
import os
import ssl
import tempfile
from pathlib import Path
from typing import Any

import pytest

from kopf_scheduler.cluster.certs import create_pki
from kopf_scheduler.cluster.controlplane import write_kubeconfig
from kopf_scheduler.kube.credentials import (
    CredentialsError,
    StaticToken,
    TokenFile,
    connection_info,
    load_credentials,
    ssl_context,
)


def kubeconfig(path: Path, server: str, *, user: dict[str, Any] | None = None, cluster: dict[str, Any] | None = None, current: str | None = "ctx",
               context: dict[str, Any] | None = None) -> Path:
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


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def places(tmp_path: Path) -> dict[str, Any]:
    """One of each source, each naming its own server; the test picks which exist."""
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token\n")
    (sa / "ca.crt").write_text("not read by the loader\n")
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
        pytest.param(True, True, True, True, "--kubeconfig", "https://flag:6443", id="--kubeconfig wins over everything"),
        pytest.param(False, True, True, True, "$KUBECONFIG", "https://env:6443", id="then $KUBECONFIG, even inside a pod"),
        pytest.param(False, False, True, True, "~/.kube/config", "https://home:6443", id="then ~/.kube/config"),
        pytest.param(False, False, False, True, "in-cluster", "https://10.0.0.1:443", id="then the in-cluster ServiceAccount"),
    ],
)
def test_precedence(places: dict[str, Any], flag: bool, env: bool, home: bool, in_cluster: bool, source: str, server: str) -> None:
    if home:
        kubeconfig(places["home"] / ".kube" / "config", "https://home:6443")
    environ = dict(places["cluster_env"]) if in_cluster else {}
    if env:
        environ["KUBECONFIG"] = str(places["env"])
    creds = load_credentials(str(places["flag"]) if flag else None, environ=environ, home=str(places["home"]), service_account_dir=str(places["sa"]))
    assert creds.source.startswith(source) and creds.server == server


def test_in_cluster_reads_the_service_account_files(places: dict[str, Any]) -> None:
    creds = load_credentials(environ=places["cluster_env"], home=str(places["home"]), service_account_dir=str(places["sa"]))
    assert creds.ca_path == str(places["sa"] / "ca.crt")
    assert creds.namespace == "kopf-scheduler"
    assert isinstance(creds.token, TokenFile) and creds.token.current() == "sa-token"


def test_in_cluster_ipv6_host_is_bracketed(places: dict[str, Any]) -> None:
    environ = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    assert load_credentials(environ=environ, home=str(places["home"]), service_account_dir=str(places["sa"])).server == "https://[fd00::1]:443"


def test_nothing_anywhere_says_where_it_looked(places: dict[str, Any]) -> None:
    with pytest.raises(CredentialsError, match=r"no --kubeconfig, \$KUBECONFIG or ~/.kube/config, and not in a cluster"):
        load_credentials(environ={}, home=str(places["home"]), service_account_dir=str(places["sa"]))


def test_kubeconfig_list_merges_first_file_wins_and_skips_missing_files(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "a.yaml", "https://first:6443", user={"token": "first-token"})
    second = tmp_path / "b.yaml"
    second.write_text(json.dumps({
        "current-context": "other",  # ignored: the first file set one
        "clusters": [{"name": "c", "cluster": {"server": "https://second:6443"}}, {"name": "extra", "cluster": {"server": "x"}}],
        "users": [{"name": "u", "user": {"token": "second-token"}}],
    }))
    environ = {"KUBECONFIG": os.pathsep.join([str(tmp_path / "missing.yaml"), str(first), str(second)])}
    creds = load_credentials(environ=environ, home=str(tmp_path))
    assert (creds.server, creds.token and creds.token.current()) == ("https://first:6443", "first-token")


def test_relative_paths_are_relative_to_the_kubeconfig_and_a_token_file_wins_over_a_token(tmp_path: Path) -> None:
    (tmp_path / "conf" / "secrets").mkdir(parents=True)
    (tmp_path / "conf" / "secrets" / "token").write_text("from-file")
    path = kubeconfig(
        tmp_path / "conf" / "config", "https://s:6443/",
        cluster={"certificate-authority": "secrets/ca.crt"},
        user={"token": "literal", "tokenFile": "secrets/token"},
        context={"namespace": "team"},
    )
    creds = load_credentials(str(path))
    assert creds.ca_path == str(tmp_path / "conf" / "secrets" / "ca.crt")
    assert creds.token is not None and creds.token.current() == "from-file"
    assert (creds.server, creds.namespace) == ("https://s:6443", "team")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param(dict(current=None), "no current-context", id="no current context"),
        pytest.param(dict(current="nope"), "current-context 'nope' is not defined", id="current context undefined"),
        pytest.param(dict(user={"exec": {"command": "aws"}}), "'exec' is not supported", id="exec plugins are refused"),
        pytest.param(dict(user={"auth-provider": {"name": "gcp"}}), "'auth-provider' is not supported", id="auth providers are refused"),
        pytest.param(dict(user={"username": "a", "password": "b"}), "'username' is not supported", id="basic auth is refused"),
        pytest.param(dict(user={"client-certificate": "c.crt"}), "needs its key", id="a certificate without its key"),
        pytest.param(dict(user={"client-key-data": "!!!"}), "needs its key", id="a key without its certificate"),
        pytest.param(dict(user={"client-certificate-data": "!!!", "client-key-data": "!!!"}), "not base64", id="embedded data that is not base64"),
        pytest.param(dict(user={"tokenFile": "/nonexistent/token"}), "cannot read the token file", id="a token file that is not there"),
    ],
)
def test_unusable_kubeconfigs_are_refused_with_a_reason(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    path = kubeconfig(tmp_path / "config", "https://s:6443", **change)
    with pytest.raises(CredentialsError, match=message):
        load_credentials(str(path))


def test_missing_files_named_explicitly_are_errors(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match="no such file"):
        load_credentials(str(tmp_path / "nope"))
    with pytest.raises(CredentialsError, match="names no existing file"):
        load_credentials(environ={"KUBECONFIG": str(tmp_path / "nope")}, home=str(tmp_path))


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


def test_a_literal_token_never_changes() -> None:
    token = StaticToken("t")
    assert (token.current(), token.refresh()) == ("t", False)


# --------------------------------------------------------------------------- what the clients get


def test_kopf_gets_the_same_server_ca_certificate_and_current_token(tmp_path: Path) -> None:
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    (tmp_path / "token").write_text("tok")
    path = kubeconfig(tmp_path / "config", "https://s:6443", cluster={"certificate-authority-data": ca}, user={"tokenFile": "token"}, context={"namespace": "ns"})
    info = connection_info(load_credentials(str(path)))
    assert (info.server, info.ca_data, info.token, info.default_namespace, info.insecure) == ("https://s:6443", b"-----BEGIN CERTIFICATE-----\n", "tok", "ns", None)


def test_embedded_client_certificates_load_into_the_tls_context(tmp_path: Path) -> None:
    pki = create_pki(tmp_path / "pki")
    path = write_kubeconfig(tmp_path / "admin.kubeconfig", server="https://127.0.0.1:1", ca_cert=pki.ca.cert, user="admin", client_cert=pki.admin)
    creds = load_credentials(str(path))
    assert creds.certificate_data == pki.admin.cert.read_bytes() and creds.token is None
    ctx = ssl_context(creds)
    assert ctx.verify_mode is ssl.CERT_REQUIRED and len(ctx.get_ca_certs()) == 1
    assert not list(Path(tempfile.gettempdir()).glob("kopf-scheduler-tls-*"))  # the key did not stay on disk


def test_insecure_skip_tls_verify_turns_verification_off(tmp_path: Path) -> None:
    creds = load_credentials(str(kubeconfig(tmp_path / "config", "https://s:6443", cluster={"insecure-skip-tls-verify": True})))
    ctx = ssl_context(creds)
    assert (ctx.verify_mode, ctx.check_hostname) == (ssl.CERT_NONE, False)
