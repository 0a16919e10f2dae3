"""The operator's one source of API credentials, for every client it runs.

``load_credentials`` looks, in this order (kubectl's and client-go's), at:

1. the ``--kubeconfig`` file;
2. ``$KUBECONFIG`` (a list separated by ``os.pathsep``; missing files are skipped and the first
   file that defines a context, cluster or user wins);
3. ``~/.kube/config`` if it exists;
4. the in-cluster ServiceAccount (``$KUBERNETES_SERVICE_HOST``/``_PORT`` and the token, CA and
   namespace files under /var/run/secrets/kubernetes.io/serviceaccount).

The ``Credentials`` it returns feed the aiohttp ``Api`` (binds, events, statuses and the
leader-election Lease: ``kube/client.py``) and Kopf's login handler (``connection_info``), so the
watches, the writes and the Lease always act as the same user.

A kubeconfig may give: ``server``, ``certificate-authority(-data)``, ``insecure-skip-tls-verify``,
``client-certificate(-data)``/``client-key(-data)``, ``token`` and ``tokenFile`` (relative paths
are relative to the file that names them). ``exec`` and ``auth-provider`` plugins and basic auth
are refused with ``CredentialsError`` ("not supported").

A bearer token read from a file (``tokenFile``, or the in-cluster projected ServiceAccount token,
which the kubelet rotates about hourly) is a ``TokenFile``: it looks at the file's mtime at most
once a second and re-reads it when it changed, and re-reads it at once when a request got a 401
(``refresh``). As in client-go, a token file wins over a literal token.
"""

from __future__ import annotations

import base64
import math
import os
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

import kopf
import yaml

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "Credentials",
    "CredentialsError",
    "StaticToken",
    "TokenFile",
    "TokenSource",
    "connection_info",
    "load_credentials",
    "ssl_context",
]

SERVICE_ACCOUNT_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
#: seconds between two looks at a token file's mtime
TOKEN_CHECK_INTERVAL: Final = 1.0


class CredentialsError(Exception):
    """No usable credentials: the message says where we looked and what was wrong."""


class TokenSource(Protocol):
    """A bearer token that may change while the process runs."""

    def current(self) -> str:
        """The token to send now."""
        ...

    def refresh(self) -> bool:
        """Look again at once (a request got a 401); True when the token changed."""
        ...


@dataclass(frozen=True, slots=True)
class StaticToken:
    """A token written into the kubeconfig: it never changes."""

    value: str

    def current(self) -> str:
        return self.value

    def refresh(self) -> bool:
        return False


class TokenFile:
    """A token read from a file and re-read when the file changes (see the module docstring)."""

    def __init__(self, path: str, *, clock: Callable[[], float] = time.monotonic, interval: float = TOKEN_CHECK_INTERVAL) -> None:
        self.path = path
        self._clock = clock
        self._interval = interval
        self._checked_at = -math.inf
        self._stamp: tuple[int, int, int] | None = None
        self._value = ""
        if not self._reload():
            raise CredentialsError(f"cannot read the token file {path}")

    def current(self) -> str:
        now = self._clock()
        if now - self._checked_at >= self._interval:
            self._checked_at = now
            self._reload()
        return self._value

    def refresh(self) -> bool:
        self._checked_at = self._clock()
        before = self._value
        self._stamp = None  # re-read even if the mtime looks the same (a rewrite within its resolution)
        self._reload()
        return self._value != before

    def _reload(self) -> bool:
        """Re-read when (mtime, inode, size) changed; keep the last token while the file is unreadable
        or empty (mid-rotation). Returns whether a token is held."""
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_ino, st.st_size)
            if stamp != self._stamp:
                value = Path(self.path).read_text().strip()
                if value:
                    self._value, self._stamp = value, stamp
        except OSError:
            pass
        return bool(self._value)


@dataclass(frozen=True, slots=True)
class Credentials:
    """Where the API server is and how to prove who we are."""

    server: str
    #: where these came from, for logs: "--kubeconfig F", "$KUBECONFIG", "~/.kube/config", "in-cluster"
    source: str
    ca_path: str | None = None
    ca_data: bytes | None = None  # PEM
    insecure: bool = False
    certificate_path: str | None = None
    certificate_data: bytes | None = None  # PEM
    private_key_path: str | None = None
    private_key_data: bytes | None = None  # PEM
    token: TokenSource | None = None
    namespace: str | None = None


# --------------------------------------------------------------------------- the loader


def load_credentials(
    kubeconfig: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    home: str | None = None,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
    clock: Callable[[], float] = time.monotonic,
) -> Credentials:
    """Credentials by the precedence in the module docstring; CredentialsError when none is usable."""
    env = os.environ if environ is None else environ
    if kubeconfig:
        if not os.path.isfile(kubeconfig):
            raise CredentialsError(f"--kubeconfig {kubeconfig}: no such file")
        return _from_kubeconfig([kubeconfig], source=f"--kubeconfig {kubeconfig}", clock=clock)
    listed = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        existing = [p for p in (os.path.expanduser(p) for p in listed) if os.path.isfile(p)]
        if not existing:
            raise CredentialsError(f"$KUBECONFIG names no existing file: {env['KUBECONFIG']}")
        return _from_kubeconfig(existing, source="$KUBECONFIG", clock=clock)
    default = os.path.join(home if home is not None else os.path.expanduser("~"), ".kube", "config")
    if os.path.isfile(default):
        return _from_kubeconfig([default], source="~/.kube/config", clock=clock)
    return _in_cluster(env, service_account_dir, clock=clock)


def _in_cluster(env: Mapping[str, str], directory: str, *, clock: Callable[[], float]) -> Credentials:
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    token_path = os.path.join(directory, "token")
    if not host or not port or not os.path.isfile(token_path):
        raise CredentialsError(
            "no credentials: no --kubeconfig, $KUBECONFIG or ~/.kube/config, and not in a cluster "
            f"($KUBERNETES_SERVICE_HOST/PORT unset or no {token_path})"
        )
    ca_path = os.path.join(directory, "ca.crt")
    ns_path = os.path.join(directory, "namespace")
    namespace = Path(ns_path).read_text().strip() if os.path.isfile(ns_path) else ""
    return Credentials(
        server=f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}",
        source="in-cluster",
        ca_path=ca_path if os.path.isfile(ca_path) else None,
        token=TokenFile(token_path, clock=clock),
        namespace=namespace or None,
    )


def _from_kubeconfig(paths: Sequence[str], *, source: str, clock: Callable[[], float]) -> Credentials:
    current = ""
    named: dict[str, dict[str, tuple[Mapping[str, Any], str]]] = {"contexts": {}, "clusters": {}, "users": {}}
    for path in paths:
        try:
            doc = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise CredentialsError(f"{source}: cannot read {path}: {exc}") from exc
        if not isinstance(doc, Mapping):
            raise CredentialsError(f"{source}: {path} is not a kubeconfig (not a mapping)")
        current = current or str(doc.get("current-context") or "")
        base = os.path.dirname(os.path.abspath(path))
        for section, field_name in (("contexts", "context"), ("clusters", "cluster"), ("users", "user")):
            for item in doc.get(section) or []:
                if isinstance(item, Mapping) and item.get("name") is not None:
                    body = item.get(field_name) or {}
                    named[section].setdefault(str(item["name"]), (body if isinstance(body, Mapping) else {}, base))
    if not current:
        raise CredentialsError(f"{source}: no current-context")
    if current not in named["contexts"]:
        raise CredentialsError(f"{source}: current-context {current!r} is not defined")
    context, _ = named["contexts"][current]
    cluster_name, user_name = str(context.get("cluster") or ""), str(context.get("user") or "")
    if cluster_name not in named["clusters"]:
        raise CredentialsError(f"{source}: context {current!r} names an undefined cluster {cluster_name!r}")
    cluster, cluster_base = named["clusters"][cluster_name]
    user, user_base = named["users"].get(user_name, ({}, ""))
    where = f"{source}: user {user_name!r}"
    for unsupported in ("exec", "auth-provider", "username", "password"):
        if user.get(unsupported):
            raise CredentialsError(f"{where}: {unsupported!r} is not supported (use a token, a tokenFile or a client certificate)")
    server = str(cluster.get("server") or "")
    if not server:
        raise CredentialsError(f"{source}: cluster {cluster_name!r} has no server")
    token: TokenSource | None = None
    if user.get("tokenFile"):
        token = TokenFile(os.path.join(user_base, os.path.expanduser(str(user["tokenFile"]))), clock=clock)
    elif user.get("token"):
        token = StaticToken(str(user["token"]))
    has_cert = bool(user.get("client-certificate") or user.get("client-certificate-data"))
    has_key = bool(user.get("client-key") or user.get("client-key-data"))
    if has_cert != has_key:
        raise CredentialsError(f"{where}: a client certificate needs its key and a key its certificate")
    return Credentials(
        server=server.rstrip("/"),
        source=source,
        ca_path=_path(cluster.get("certificate-authority"), cluster_base),
        ca_data=_data(cluster.get("certificate-authority-data"), f"{source}: cluster {cluster_name!r} certificate-authority-data"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        certificate_path=_path(user.get("client-certificate"), user_base),
        certificate_data=_data(user.get("client-certificate-data"), f"{where} client-certificate-data"),
        private_key_path=_path(user.get("client-key"), user_base),
        private_key_data=_data(user.get("client-key-data"), f"{where} client-key-data"),
        token=token,
        namespace=str(context.get("namespace") or "") or None,
    )


def _path(value: Any, base: str) -> str | None:
    return os.path.join(base, os.path.expanduser(str(value))) if value else None


def _data(value: Any, what: str) -> bytes | None:
    if not value:
        return None
    try:
        return base64.b64decode(str(value), validate=True)
    except ValueError as exc:
        raise CredentialsError(f"{what}: not base64: {exc}") from exc


# --------------------------------------------------------------------------- what the clients take


def ssl_context(creds: Credentials) -> ssl.SSLContext:
    """TLS for our aiohttp client: the cluster's CA (or the system's), the client certificate if any."""
    ctx = ssl.create_default_context(cafile=creds.ca_path, cadata=creds.ca_data.decode() if creds.ca_data else None)
    if creds.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if creds.certificate_path or creds.certificate_data:
        with tempfile.TemporaryDirectory(prefix="kopf-scheduler-tls-") as tmp:  # ssl loads a chain from files only
            cert = creds.certificate_path or _write(tmp, "tls.crt", creds.certificate_data)
            key = creds.private_key_path or _write(tmp, "tls.key", creds.private_key_data)
            if cert is None or key is None:
                raise CredentialsError(f"{creds.source}: a client certificate needs its key")
            ctx.load_cert_chain(cert, key)
    return ctx


def _write(directory: str, name: str, data: bytes | None) -> str | None:
    if data is None:
        return None
    path = os.path.join(directory, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(data)
    return path


def connection_info(creds: Credentials) -> kopf.ConnectionInfo:
    """What Kopf's login handler returns: the same server, CA, client certificate and current token."""
    return kopf.ConnectionInfo(
        server=creds.server,
        ca_path=creds.ca_path,
        ca_data=creds.ca_data,
        insecure=creds.insecure or None,
        certificate_path=creds.certificate_path,
        certificate_data=creds.certificate_data,
        private_key_path=creds.private_key_path,
        private_key_data=creds.private_key_data,
        token=creds.token.current() if creds.token is not None else None,
        default_namespace=creds.namespace,
    )
