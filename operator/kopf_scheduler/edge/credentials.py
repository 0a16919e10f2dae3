"""The one source of API credentials, for every command: the operator, ``simulate --from-cluster``, ...

``load_credentials`` looks, in this order (kubectl's and client-go's), at:

1. the ``--kubeconfig`` file;
2. ``$KUBECONFIG`` (a list separated by ``os.pathsep``; missing files are skipped, the first file
   that sets ``current-context`` or defines a context, cluster or user wins);
3. ``~/.kube/config`` if it exists;
4. the in-cluster ServiceAccount (``$KUBERNETES_SERVICE_HOST``/``_PORT`` and the token, CA and
   namespace files under /var/run/secrets/kubernetes.io/serviceaccount).

Kubeconfigs are read here, and the official ``kubernetes`` client is imported only for a user that
needs it: for start-up, as importing it costs 0.3-0.4 s (its generated models, google-auth...), and
Kopf is imported without it (``kube/__init__.py``). What we read means what it means to that client and
to kubectl:

- the files are merged as the client's ``KubeConfigMerger`` merges them: for each name in ``clusters``,
  ``contexts`` and ``users`` the first file that defines it wins; each entry's relative paths are
  relative to the folder of its own file, as in kubectl (the client resolves a user's certificate paths
  against its cluster's file); the first file's ``current-context`` wins, as in kubectl (the client lets
  the last one win);
- the cluster's ``server``, ``certificate-authority``, ``insecure-skip-tls-verify``, ``tls-server-name``
  and ``proxy-url``, the context's ``namespace``, and a user's ``client-certificate``/``client-key``,
  ``token`` or ``tokenFile`` (or none: anonymous). A ``*-data`` field (base64 of PEM) wins over its path
  even when empty, as in the client, and goes into ``*_data``; TLS material is read for https only;
- a ``tokenFile`` becomes a ``TokenFile``, re-read when it changes (the client reads it once); as in
  client-go it wins over a literal ``token``;
- the in-cluster ServiceAccount is checked as the client's ``InClusterConfigLoader`` checks it (an IPv6
  host bracketed; the token and CA files there and not empty).

An ``exec`` or ``auth-provider`` user (``oidc``, and ``gcp`` with a token in the file or google-auth
installed) goes through the client's ``KubeConfigLoader``, imported then:

- its token becomes a ``PluginToken``: ``refresh`` runs the client's loader again, so an exec plugin
  runs again (an auth-provider renews only within the client's five minutes of its expiry); an exec
  plugin that fails is a ``CredentialsError`` naming it (the client only logs it);
- an oidc or gcp token the loader renewed is written back to the kubeconfig, as kubectl does (a
  read-only file is logged and left alone);
- PEM the loader wrote to temporary files for ``*-data`` (or an exec plugin's certificate) is read
  back into ``*_data`` and its files deleted at once. An exec plugin's client certificate is read
  once: when it expires, the process must load its credentials again.

Basic auth is refused: kube-apiserver dropped it in v1.19; so is ``auth-provider: azure``: the client
no longer has it (use kubelogin, an exec plugin).

Anything unusable, found here or raised by the client, is a ``CredentialsError`` that names where the
credentials came from. Refreshing never raises: a failed refresh returns False and is logged (``PluginToken.error``).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import shutil
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final, NamedTuple, Protocol

import yaml

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "STALE_SKEW",
    "TOKEN_CHECK_INTERVAL",
    "Credentials",
    "CredentialsError",
    "PluginToken",
    "StaticToken",
    "TokenFile",
    "TokenSource",
    "load_credentials",
    "ssl_context",
]

logger = logging.getLogger(__name__)

SERVICE_ACCOUNT_DIR: Final = "/var/run/secrets/kubernetes.io/serviceaccount"
#: seconds between two looks at a token file's mtime, and between two refreshes a stale token asks for
TOKEN_CHECK_INTERVAL: Final = 1.0
#: a token that expires within this is stale: refreshed before it is sent
STALE_SKEW: Final = timedelta(seconds=10)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class CredentialsError(Exception):
    """No usable credentials: ``source`` says where we looked, ``reason`` what was wrong."""

    def __init__(self, source: str, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason


class TokenSource(Protocol):
    """A bearer token that may change while the process runs."""

    def current(self) -> str:
        """The token to send now; cheap, never runs a plugin."""
        ...

    def stale(self) -> bool:
        """True when the token expires within ``STALE_SKEW``: refresh it before sending it."""
        ...

    def refresh(self) -> bool:
        """Get a token now (blocking: may run a plugin or read a file); True when it changed.
        Callers call it when ``stale()`` and after a 401."""
        ...

    @property
    def expiration(self) -> datetime | None:
        """When the token expires (UTC), if known: Kopf's ``ConnectionInfo.expiration``."""
        ...


@dataclass(frozen=True, slots=True)
class StaticToken:
    """A token written into the kubeconfig: it never changes."""

    value: str

    def current(self) -> str:
        return self.value

    def stale(self) -> bool:
        return False

    def refresh(self) -> bool:
        return False

    @property
    def expiration(self) -> datetime | None:
        return None


class TokenFile:
    """A token read from a file (``tokenFile``, the in-cluster ServiceAccount token the kubelet
    rotates about hourly): the file's mtime is looked at at most once a second and the file re-read
    when it changed; ``refresh`` (after a 401) re-reads it at once."""

    def __init__(
        self, path: str, *, clock: Callable[[], float] = time.monotonic, interval: float = TOKEN_CHECK_INTERVAL
    ) -> None:
        self.path = path
        self._clock = clock
        self._interval = interval
        self._checked_at = -math.inf
        self._stamp: tuple[int, int, int] | None = None
        self._value = ""
        if not self._reload():
            raise CredentialsError(path, "cannot read the token file (missing or empty)")

    def current(self) -> str:
        now = self._clock()
        if now - self._checked_at >= self._interval:
            self._checked_at = now
            self._reload()
        return self._value

    def stale(self) -> bool:
        return False  # rotated before it expires; current() sees the new file

    def refresh(self) -> bool:
        self._checked_at = self._clock()
        before = self._value
        self._stamp = None  # re-read even if the mtime looks the same (a rewrite within its resolution)
        self._reload()
        return self._value != before

    @property
    def expiration(self) -> datetime | None:
        return None

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


class PluginToken:
    """A token from an ``exec`` plugin or an ``auth-provider``: ``refresh`` runs the official loader
    again (``login``). Stale within ``STALE_SKEW`` of its expiry, never without one; a stale token
    that one refresh did not renew asks again at most once a second, so a plugin that hands out
    short-lived tokens is not run for every request."""

    def __init__(
        self,
        login: Callable[[], tuple[str, datetime | None]],
        value: str,
        expiration: datetime | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        self._login = login
        self._value = value
        self._expiration = expiration
        self._clock = clock
        self._wall_clock = wall_clock
        self._tried_at = -math.inf
        self._lock = threading.Lock()
        #: why the last refresh failed, None after a success
        self.error: str | None = None

    def current(self) -> str:
        return self._value

    @property
    def expiration(self) -> datetime | None:
        return self._expiration

    def stale(self) -> bool:
        if self._expiration is None or self._clock() - self._tried_at < TOKEN_CHECK_INTERVAL:
            return False
        return self._expiration - self._wall_clock() <= STALE_SKEW

    def refresh(self) -> bool:
        before = self._value
        with self._lock:  # one login at a time; a caller that waited for another's gets its token
            if self._value != before:
                return True
            self._tried_at = self._clock()
            try:
                value, expiration = self._login()
            except CredentialsError as exc:
                self.error = str(exc)
                logger.warning("cannot refresh the API token: %s", exc)
                return False
            self._value, self._expiration, self.error = value, expiration, None
            return value != before


@dataclass(frozen=True, slots=True)
class Credentials:
    """Where the API server is and how to prove who we are: every field Kopf's ``ConnectionInfo`` takes."""

    #: scheme://host:port[/path], no trailing slash
    server: str
    #: where these came from, for logs: "--kubeconfig F", "$KUBECONFIG", "~/.kube/config", "in-cluster"
    source: str
    ca_path: str | None = None
    ca_data: bytes | None = None  # PEM
    insecure: bool = False
    #: the name to verify the server's certificate against (and send as SNI) instead of the host's
    tls_server_name: str | None = None
    certificate_path: str | None = None
    certificate_data: bytes | None = None  # PEM
    private_key_path: str | None = None
    private_key_data: bytes | None = None  # PEM
    token: TokenSource | None = None
    namespace: str | None = None
    #: the kubeconfig's ``proxy-url``
    proxy_url: str | None = None


# --------------------------------------------------------------------------- the loader


def load_credentials(
    kubeconfig: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    home: str | None = None,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
    clock: Callable[[], float] = time.monotonic,
    wall_clock: Callable[[], datetime] = _utc_now,
) -> Credentials:
    """Credentials by the precedence in the module docstring; CredentialsError when none is usable.
    An exec plugin runs here (once)."""
    env = os.environ if environ is None else environ
    if kubeconfig:
        source = f"--kubeconfig {kubeconfig}"
        if not os.path.isfile(kubeconfig):
            raise CredentialsError(source, "no such file")
        return _Kubeconfig([kubeconfig], source, clock=clock, wall_clock=wall_clock).credentials()
    listed = [p for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        existing = [p for p in (os.path.expanduser(p) for p in listed) if os.path.isfile(p)]
        if not existing:
            raise CredentialsError("$KUBECONFIG", f"names no existing file: {env['KUBECONFIG']}")
        return _Kubeconfig(existing, "$KUBECONFIG", clock=clock, wall_clock=wall_clock).credentials()
    default = os.path.join(home if home is not None else os.path.expanduser("~"), ".kube", "config")
    if os.path.isfile(default):
        return _Kubeconfig([default], "~/.kube/config", clock=clock, wall_clock=wall_clock).credentials()
    return _in_cluster(env, service_account_dir, clock=clock)


def _in_cluster(env: Mapping[str, str], directory: str, *, clock: Callable[[], float]) -> Credentials:
    """The pod's ServiceAccount, checked as the official ``InClusterConfigLoader`` checks it
    (kubernetes/config/incluster_config.py): host and port set, the token and CA files there and not empty."""
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise CredentialsError(
            "no credentials",
            "no --kubeconfig, $KUBECONFIG or ~/.kube/config,"
            " and not in a cluster ($KUBERNETES_SERVICE_HOST/PORT unset)",
        )

    def refused(why: str) -> CredentialsError:
        return CredentialsError("in-cluster", f"{why} (in {directory})")

    token_path, ca_path = os.path.join(directory, "token"), os.path.join(directory, "ca.crt")
    if not os.path.isfile(token_path):
        raise refused("Service token file does not exist")
    try:
        token = TokenFile(token_path, clock=clock)
    except CredentialsError:
        raise refused("Service token file is empty or unreadable") from None
    if not os.path.isfile(ca_path):
        raise refused("Service certification file does not exist")
    try:
        with open(ca_path, "rb") as f:
            empty = not f.read(1)
    except OSError as exc:
        raise refused(f"cannot read the service certification file: {exc}") from None
    if empty:
        raise refused("Service certification file is empty")
    try:
        namespace = Path(os.path.join(directory, "namespace")).read_text().strip()
    except OSError:
        namespace = ""
    return Credentials(
        server=f"https://{_join_host_port(host, port)}",
        source="in-cluster",
        ca_path=ca_path,
        token=token,
        namespace=namespace or None,
    )


def _join_host_port(host: str, port: str) -> str:
    """``host:port``, an IPv6 host (or one with a zone) in brackets, as Go's ``net.JoinHostPort``."""
    return f"[{host}]:{port}" if ":" in host or "%" in host else f"{host}:{port}"


_Material = tuple[str | None, bytes | None]  # (path, PEM data)
_NOTHING: Final[_Material] = (None, None)


class _Entry(NamedTuple):
    """A named entry of a kubeconfig (its ``cluster``, ``context`` or ``user`` mapping) and the folder of
    the file that defined it, against which its relative paths are resolved."""

    value: Mapping[str, Any]
    folder: str


#: the C parser when PyYAML was built with libyaml (several times faster), else the pure-Python one
_YAML_LOADER: Final[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SECTIONS: Final = {"clusters": "cluster", "contexts": "context", "users": "user"}


def _merge(paths: Sequence[str], source: str) -> tuple[str, dict[str, dict[str, _Entry]]]:
    """The files' ``current-context`` and their clusters, contexts and users by name, merged as the official
    ``KubeConfigMerger`` merges them (kubernetes/config/kube_config.py): for each name the first file that
    defines it wins. ``current-context`` is the first file's that sets one, as in kubectl (the merger keeps
    the last)."""
    current = ""
    named: dict[str, dict[str, _Entry]] = {section: {} for section in _SECTIONS}
    for path in paths:
        try:
            with open(path, "rb") as f:
                doc = yaml.load(f, Loader=_YAML_LOADER)
        except (OSError, yaml.YAMLError) as exc:
            raise CredentialsError(source, f"{path}: {_reason(exc)}") from None
        if doc is None:
            raise CredentialsError(source, f"{path} is empty")
        if not isinstance(doc, dict):
            raise CredentialsError(source, f"{path} is not a kubeconfig (a YAML mapping)")
        if not current and doc.get("current-context"):
            current = str(doc["current-context"])
        folder = os.path.dirname(os.path.abspath(path))
        for section, key in _SECTIONS.items():
            entries = doc.get(section) or []
            if not isinstance(entries, list):
                raise CredentialsError(source, f"{path}: {section} is not a list")
            for entry in entries:
                if not isinstance(entry, dict) or "name" not in entry:
                    raise CredentialsError(source, f"{path}: an entry of {section} has no name")
                value = entry.get(key)
                named[section].setdefault(str(entry["name"]), _Entry(value if isinstance(value, dict) else {}, folder))
    return current, named


@dataclass(frozen=True, slots=True)
class _Loaded:
    """What one run of the official kubeconfig loader gave."""

    server: str
    ca: _Material
    certificate: _Material
    private_key: _Material
    insecure: bool
    tls_server_name: str | None
    proxy_url: str | None
    token: str | None  # without its "Bearer " prefix
    expiration: datetime | None
    namespace: str | None


class _Kubeconfig:
    """The merged kubeconfig files and the user of their current context. A user with a static
    credential is read here (``_static``); an ``exec`` or ``auth-provider`` user goes through the official
    loader (``load``, again for every refresh: a fresh ``KubeConfigLoader`` each time, so a plugin that
    fails shows as no token rather than the last run's)."""

    def __init__(
        self, paths: Sequence[str], source: str, *, clock: Callable[[], float], wall_clock: Callable[[], datetime]
    ) -> None:
        self.source = source
        self._paths = list(paths)
        self._clock = clock
        self._wall_clock = wall_clock
        self._merger: Any = None  # the official KubeConfigMerger, for plugin users only
        self._context, named = _merge(self._paths, source)
        if not self._context:
            raise CredentialsError(source, "no current-context")
        context = named["contexts"].get(self._context)
        if context is None:
            raise CredentialsError(source, f"current-context {self._context!r} is not defined")
        self._namespace = str(context.value.get("namespace") or "") or None
        cluster_name = str(context.value.get("cluster") or "")
        if not cluster_name:
            raise CredentialsError(source, f"context {self._context!r} names no cluster")
        cluster = named["clusters"].get(cluster_name)
        if cluster is None:
            raise CredentialsError(source, f"context {self._context!r}: cluster {cluster_name!r} is not defined")
        self._cluster = cluster
        # a user that is named but not defined is no user (anonymous), as for the official loader
        self._user_name = str(context.value.get("user") or "")
        user = named["users"].get(self._user_name) if self._user_name else None
        self._user: Mapping[str, Any] = user.value if user is not None else {}
        self._user_dir = user.folder if user is not None else ""
        self._where = f"user {self._user_name!r}"

    def credentials(self) -> Credentials:
        self._refuse_what_the_client_cannot_do()
        method = self._method()
        if method not in ("auth-provider", "exec"):
            return self._static(method)
        loaded = self.load()
        token: TokenSource | None = None
        if loaded.token is not None:
            token = PluginToken(
                self._login, loaded.token, loaded.expiration, clock=self._clock, wall_clock=self._wall_clock
            )
        elif loaded.certificate == (None, None):
            raise CredentialsError(self.source, f"{self._where}: {self._what(method)} gave no token")
        return Credentials(
            server=loaded.server,
            source=self.source,
            ca_path=loaded.ca[0],
            ca_data=loaded.ca[1],
            insecure=loaded.insecure,
            tls_server_name=loaded.tls_server_name,
            certificate_path=loaded.certificate[0],
            certificate_data=loaded.certificate[1],
            private_key_path=loaded.private_key[0],
            private_key_data=loaded.private_key[1],
            token=token,
            namespace=loaded.namespace,
            proxy_url=loaded.proxy_url,
        )

    def _static(self, method: str) -> Credentials:
        """A client certificate, a token, a tokenFile or nothing: what the official loader would set, read here."""
        cluster = self._cluster.value
        server = str(cluster.get("server") or "").rstrip("/")
        if not server:
            raise CredentialsError(self.source, f"context {self._context!r}: its cluster has no server")
        ca: _Material = _NOTHING
        certificate: _Material = _NOTHING
        private_key: _Material = _NOTHING
        if server.startswith("https"):  # the official loader reads TLS material for https only
            ca = self._file_or_data(cluster, "certificate-authority", self._cluster.folder, "certificate authority")
            certificate = self._file_or_data(self._user, "client-certificate", self._user_dir, "client certificate")
            private_key = self._file_or_data(self._user, "client-key", self._user_dir, "client key")
            if (certificate == _NOTHING) != (private_key == _NOTHING):
                raise CredentialsError(
                    self.source, f"{self._where}: a client certificate needs its key and a key its certificate"
                )
        token: TokenSource | None = None
        if method == "tokenFile":  # re-read on rotation, and it wins over a literal token (client-go)
            path = os.path.normpath(os.path.join(self._user_dir, str(self._user["tokenFile"])))
            try:
                with open(path, "rb"):
                    pass
            except OSError as exc:
                raise CredentialsError(self.source, f"{self._where}: tokenFile: {exc}") from None
            try:
                token = TokenFile(path, clock=self._clock)
            except CredentialsError as exc:
                raise CredentialsError(self.source, f"{self._where}: tokenFile {path}: {exc.reason}") from None
        elif method == "token":
            token = StaticToken(str(self._user["token"]))  # verbatim: "Bearer " is added when it is sent
        return Credentials(
            server=server,
            source=self.source,
            ca_path=ca[0],
            ca_data=ca[1],
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
            tls_server_name=_text(cluster.get("tls-server-name")),
            certificate_path=certificate[0],
            certificate_data=certificate[1],
            private_key_path=private_key[0],
            private_key_data=private_key[1],
            token=token,
            namespace=self._namespace,
            proxy_url=_text(cluster.get("proxy-url")),
        )

    def _file_or_data(self, entry: Mapping[str, Any], key: str, folder: str, what: str) -> _Material:
        """``KEY-data`` (base64 of PEM) or the file ``KEY`` names, relative to ``folder``. As for the official
        loader (its ``FileOrData``), a ``KEY-data`` that is there wins even when empty, and then means none."""
        if f"{key}-data" in entry:
            encoded = entry[f"{key}-data"]
            if not encoded:
                return _NOTHING
            try:
                data = base64.standard_b64decode(str(encoded))
            except ValueError:
                data = b""
            if b"-----BEGIN" not in data:
                raise CredentialsError(
                    self.source, f"the {what} given as data is not PEM (base64 of a PEM file is expected)"
                )
            return None, data
        if not entry.get(key):
            return _NOTHING
        path = os.path.normpath(os.path.join(folder, str(entry[key])))
        if not os.path.isfile(path):
            raise CredentialsError(self.source, f"context {self._context!r}: File does not exist: {path}")
        return path, None

    def _method(self) -> str:
        """How the loader authenticates this user, in its order (auth-provider, token, exec, basic)."""
        for method in ("auth-provider", "tokenFile", "token", "exec", "username"):
            if self._user.get(method):
                return method
        return ""

    def _what(self, method: str) -> str:
        if method == "exec":
            return f"exec plugin {str((self._user.get('exec') or {}).get('command') or '')!r}"
        return f"auth-provider {str((self._user.get('auth-provider') or {}).get('name') or '')!r}"

    def _refuse_what_the_client_cannot_do(self) -> None:
        method = self._method()
        provider = str((self._user.get("auth-provider") or {}).get("name") or "")
        if method == "auth-provider" and provider not in ("oidc", "gcp"):
            hint = (
                "use kubelogin, an exec plugin, as kubectl does since v1.26"
                if provider == "azure"
                else "use an exec plugin"
            )
            raise CredentialsError(
                self.source,
                f"{self._where}: auth-provider {provider!r} is not supported by the kubernetes client ({hint})",
            )
        if method == "username":
            raise CredentialsError(
                self.source,
                f"{self._where}: basic auth (username/password) is not supported: kube-apiserver dropped it in v1.19 "
                "(use a token, a tokenFile, an exec plugin or a client certificate)",
            )

    def _login(self) -> tuple[str, datetime | None]:
        """A PluginToken's refresh: the loader's authentication again."""
        loaded = self.load()
        if loaded.token is None:
            raise CredentialsError(self.source, f"{self._where}: {self._what(self._method())} gave no token")
        return loaded.token, loaded.expiration

    def _official_merger(self) -> Any:
        """The official ``KubeConfigMerger`` of the same files, made on first use: importing the client
        costs a third of a second, paid only by exec and auth-provider users."""
        if self._merger is None:
            from kubernetes.config.kube_config import KubeConfigMerger

            try:
                self._merger = KubeConfigMerger(os.pathsep.join(self._paths))  # type: ignore[no-untyped-call]
            except Exception as exc:
                raise CredentialsError(self.source, _reason(exc)) from None
        return self._merger

    def load(self) -> _Loaded:
        """Run the official loader once; the files it writes for ``*-data`` are read back and deleted."""
        import kubernetes.client
        from kubernetes.config.kube_config import KubeConfigLoader

        merger = self._official_merger()
        scratch = tempfile.mkdtemp(prefix="kopf-scheduler-kubeconfig-")
        method = self._method()
        try:
            configuration = kubernetes.client.Configuration()
            with _loader_log() as complaints:
                try:
                    loader = KubeConfigLoader(  # type: ignore[no-untyped-call]
                        merger.config,
                        active_context=self._context,
                        config_base_path=None,  # each file's own folder, as load_kube_config does
                        config_persister=self._persist,
                        temp_file_path=scratch,
                    )
                    loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
                except Exception as exc:
                    what = (
                        f"{self._where}: {self._what(method)}"
                        if method in ("auth-provider", "exec")
                        else f"context {self._context!r}"
                    )
                    raise CredentialsError(self.source, f"{what}: {_reason(exc)}{self._hint(method)}") from None
            found = vars(loader)
            if method == "exec" and (complaints or not (found.get("token") or found.get("cert_file"))):
                why = "; ".join(complaints) or "it gave neither a token nor a client certificate"
                raise CredentialsError(
                    self.source, f"{self._where}: {self._what(method)} failed: {why}{self._hint(method)}"
                )
            if "host" not in found:
                raise CredentialsError(self.source, f"context {self._context!r}: its cluster has no server")
            certificate = _material(configuration.cert_file, scratch, self.source, "client certificate")
            private_key = _material(configuration.key_file, scratch, self.source, "client key")
            if (certificate == _NOTHING) != (private_key == _NOTHING):
                raise CredentialsError(
                    self.source, f"{self._where}: a client certificate needs its key and a key its certificate"
                )
            token = configuration.api_key.get("BearerToken")
            token = str(token).split(" ", 1)[1] if token and " " in str(token) else token
            expiration = found.get("expiry")
            if method == "auth-provider" and expiration is None and token:
                expiration = _jwt_expiration(token)  # oidc: the id-token's exp
            namespace = (loader.current_context.get("context") or {}).get("namespace")
            return _Loaded(
                server=str(found["host"]).rstrip("/"),
                ca=_material(configuration.ssl_ca_cert, scratch, self.source, "certificate authority"),
                certificate=certificate,
                private_key=private_key,
                insecure=not configuration.verify_ssl,
                tls_server_name=found.get("tls_server_name"),
                proxy_url=found.get("proxy"),
                token=str(token) if token else None,
                expiration=expiration if isinstance(expiration, datetime) else None,
                namespace=str(namespace) if namespace else None,
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def _hint(self, method: str) -> str:
        if method == "exec":
            hint = (self._user.get("exec") or {}).get("installHint")
            return f" ({str(hint).strip()})" if hint else ""
        if method == "auth-provider" and (self._user.get("auth-provider") or {}).get("name") == "gcp":
            return (
                " (renewing a gcp token needs the google-auth package;"
                " kubectl uses gke-gcloud-auth-plugin, an exec plugin, since v1.26)"
            )
        return ""

    def _persist(self) -> None:
        """The loader renewed an oidc or gcp token: write it back as kubectl does, unless the file is read-only."""
        try:
            self._official_merger().save_changes()
        except OSError as exc:
            logger.warning("%s: cannot save the renewed token: %s", self.source, exc)


def _text(value: Any) -> str | None:
    return str(value) if value else None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip()
    return text if text else type(exc).__name__


def _material(path: str | None, scratch: str, source: str, what: str) -> _Material:
    """A file the loader named: (path, None) for the user's own file, (None, PEM) for one it wrote from data."""
    if not path:
        return None, None
    if os.path.dirname(os.path.abspath(path)) != os.path.abspath(scratch):
        return path, None
    data = Path(path).read_bytes()
    if b"-----BEGIN" not in data:
        raise CredentialsError(source, f"the {what} given as data is not PEM (base64 of a PEM file is expected)")
    return None, data


def _jwt_expiration(token: str) -> datetime | None:
    """The ``exp`` claim of a JWT, unverified (the API server verifies it); None if it has none."""
    try:
        payload = token.split(".")[1]
        exp = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))["exp"]
        return datetime.fromtimestamp(float(exp), UTC)
    except (IndexError, ValueError, KeyError, TypeError, OverflowError):
        return None


class _Complaints(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.module in ("kube_config", "exec_provider"):
            self.messages.append(record.getMessage())


@contextmanager
def _loader_log() -> Iterator[list[str]]:
    """What the official loader logs instead of raising (an exec plugin's failure), collected."""
    handler = _Complaints()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler.messages
    finally:
        root.removeHandler(handler)


# --------------------------------------------------------------------------- what the clients take


def ssl_context(creds: Credentials) -> ssl.SSLContext:
    """TLS for our asyncio client: the cluster's CA (or the system's), the client certificate if any.
    The context cannot carry ``tls_server_name``: callers pass it as ``server_hostname``."""
    ctx = ssl.create_default_context(cafile=creds.ca_path, cadata=creds.ca_data.decode() if creds.ca_data else None)
    if creds.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if creds.certificate_path or creds.certificate_data:
        with tempfile.TemporaryDirectory(prefix="kopf-scheduler-tls-") as tmp:  # ssl loads a chain from files only
            cert = creds.certificate_path or _write(tmp, "tls.crt", creds.certificate_data)
            key = creds.private_key_path or _write(tmp, "tls.key", creds.private_key_data)
            if cert is None or key is None:
                raise CredentialsError(creds.source, "a client certificate needs its key")
            ctx.load_cert_chain(cert, key)
    return ctx


def _write(directory: str, name: str, data: bytes | None) -> str | None:
    if data is None:
        return None
    path = os.path.join(directory, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(data)
    return path
