"""``HTTPExtender``: the blocking HTTP(S) client behind a policy's extenders, for the operator and ``simulate``.

Upstream ``pkg/scheduler/extender.go`` (``HTTPExtender``) and the wire types of
``k8s.io/kube-scheduler/extender/v1/types.go``. Each call is ``POST <urlPrefix without trailing
"/">/<verb>`` with a JSON body; any status but 200 is an error. The Go types carry no JSON tags,
so requests use their field names (``Pod``, ``Nodes``, ``NodeNames``...) and answers are read
with Go's case-insensitive key matching (``nodeNames`` and ``NodeNames`` both work):

- filter and prioritize send ``ExtenderArgs``: the pod and either the candidate nodes as a
  ``NodeList`` or, for a ``nodeCacheCapable`` extender, only their names. Objects go out as the
  API server gave them (``Pod.source``/``Node.source``, managedFields trimmed). Filter answers an
  ``ExtenderFilterResult`` (``Nodes`` or, when node-cache capable, ``NodeNames``; ``FailedNodes``;
  ``FailedAndUnresolvableNodes``; ``Error``); prioritize a ``HostPriorityList``.
- bind sends ``ExtenderBindingArgs`` and reads ``ExtenderBindingResult``.

Error texts follow Go's client (``Post "<url>": ...``, ``failed <verb> with extender at URL <url>,
code <status>``), so they read as upstream's in FailedScheduling events. ``httpTimeout`` bounds the
whole call (connect, send, answer), as Go's ``Client.Timeout``. Connections are kept alive and
pooled per extender, and a call that finds a pooled connection closed by the server is retried
once on a new one. TLS follows ``ExtenderTLSConfig`` (see ``core/extenders.py``): certificate and
CA files are re-read when they change on disk, so rotated certificates are picked up.

Calls block: the operator makes them from a worker thread, never on its event loop. A decoded
answer (or the failure) is a value; nothing here raises for an extender's fault.
"""

from __future__ import annotations

import datetime as _dt
import http.client
import json
import os
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from ..core.extenders import (
    Extender,
    ExtenderConfig,
    ExtenderFilterResult,
    ExtenderPrioritizeResult,
    ExtenderTLSConfig,
    HostPriority,
)
from ..core.nodeinfo import NodeInfo
from ..core.objects import Node, Pod
from ..core.specs import FieldError

__all__ = [
    "HTTPExtender",
    "decode_filter_result",
    "decode_host_priorities",
    "encode_binding_args",
    "encode_extender_args",
    "setup_problems",
    "tls_context",
]

#: Go's wording for a call that outlived ``httpTimeout``
TIMEOUT_REASON: Final = "context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
#: idle connections kept per extender
POOL_SIZE: Final = 8
_READ_CHUNK: Final = 65536


class ExtenderCallError(Exception):
    """A call that failed; the message is what users read."""


# --------------------------------------------------------------------------- the wire format (pure)


def _json_default(value: Any) -> Any:
    if isinstance(value, _dt.datetime):  # YAML files give timestamps as datetimes
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, _dt.date):
        return value.isoformat()
    raise TypeError(f"cannot send {type(value).__name__} to an extender")


def to_json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), default=_json_default).encode()


def pod_json(pod: Pod) -> bytes:
    """The pod as the API server gave it, or (a pod parsed without its body) its identity."""
    if pod.source is not None:
        return to_json(pod.source)
    return to_json({"metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}})


def node_json(node: Node) -> bytes:
    return to_json(node.source if node.source is not None else {"metadata": {"name": node.name}})


def encode_extender_args(
    pod: bytes, *, nodes: Sequence[bytes] | None = None, node_names: Sequence[str] | None = None
) -> bytes:
    """``ExtenderArgs`` from encoded JSON: the pod, and the nodes (a ``NodeList``) or their names."""
    node_list = b"null" if nodes is None else b'{"metadata":{},"items":[' + b",".join(nodes) + b"]}"
    names = b"null" if node_names is None else to_json(list(node_names))
    return b'{"Pod":' + pod + b',"Nodes":' + node_list + b',"NodeNames":' + names + b"}"


def encode_binding_args(pod: Pod, node: str) -> bytes:
    """``ExtenderBindingArgs``."""
    return to_json({"PodName": pod.name, "PodNamespace": pod.namespace, "PodUID": pod.uid, "Node": node})


def _field(obj: Mapping[str, Any], name: str) -> Any:
    """Go's encoding/json lookup: the exact key, else a key equal but for case."""
    if name in obj:
        return obj[name]
    low = name.lower()
    for key, value in obj.items():
        if isinstance(key, str) and key.lower() == low:
            return value
    return None


def _names_of_node_list(value: Any) -> list[str]:
    if not isinstance(value, Mapping):
        raise ValueError("Nodes: expected a NodeList object")
    items = _field(value, "items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise ValueError("Nodes.items: expected a list")
    names = []
    for i, item in enumerate(items):
        meta = _field(item, "metadata") if isinstance(item, Mapping) else None
        name = _field(meta, "name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str):
            raise ValueError(f"Nodes.items[{i}]: expected a node with metadata.name")
        names.append(name)
    return names


def _failed_map(value: Any, key: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"{key}: expected an object of node names to messages")
    return dict(value)


def decode_filter_result(data: Any, *, node_cache_capable: bool) -> ExtenderFilterResult:
    """An ``ExtenderFilterResult`` answer -> the passing node names (upstream ``HTTPExtender.Filter``:
    ``NodeNames`` count only for a node-cache-capable extender, ``Nodes`` otherwise or when they are
    null), the failed nodes, or the extender's ``Error``."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        return ExtenderFilterResult(error="decoding the filter answer: expected an ExtenderFilterResult object")
    try:
        problem = _field(data, "Error")
        if problem:
            return ExtenderFilterResult(error=str(problem))
        names: list[str] = []
        node_names = _field(data, "NodeNames")
        nodes = _field(data, "Nodes")
        if node_cache_capable and node_names is not None:
            if not isinstance(node_names, list) or not all(isinstance(n, str) for n in node_names):
                raise ValueError("NodeNames: expected a list of node names")
            names = node_names
        elif nodes is not None:
            names = _names_of_node_list(nodes)
        failed = _failed_map(_field(data, "FailedNodes"), "FailedNodes")
        unresolvable = _failed_map(_field(data, "FailedAndUnresolvableNodes"), "FailedAndUnresolvableNodes")
    except ValueError as exc:
        return ExtenderFilterResult(error=f"decoding the filter answer: {exc}")
    return ExtenderFilterResult(tuple(names), failed, unresolvable)


def decode_host_priorities(data: Any) -> ExtenderPrioritizeResult:
    """A ``HostPriorityList`` answer (null is an empty list)."""
    if data is None:
        return ExtenderPrioritizeResult()
    if not isinstance(data, list):
        return ExtenderPrioritizeResult(error="decoding the prioritize answer: expected a HostPriorityList (a list)")
    out = []
    for i, item in enumerate(data):
        host = _field(item, "Host") if isinstance(item, Mapping) else None
        score = _field(item, "Score") if isinstance(item, Mapping) else None
        if not isinstance(host, str) or isinstance(score, bool) or not isinstance(score, int):
            return ExtenderPrioritizeResult(
                error=f"decoding the prioritize answer: [{i}]: expected {{Host: string, Score: integer}}"
            )
        out.append(HostPriority(host, score))
    return ExtenderPrioritizeResult(tuple(out))


def decode_binding_result(data: Any) -> str:
    """An ``ExtenderBindingResult``: "" when bound, else its ``Error``."""
    if data is None:
        return ""
    if not isinstance(data, Mapping):
        return "decoding the bind answer: expected an ExtenderBindingResult object"
    problem = _field(data, "Error")
    return str(problem) if problem else ""


# --------------------------------------------------------------------------- TLS


def _tls_files(tls: ExtenderTLSConfig) -> tuple[str, ...]:
    """The files the context is built from (data wins over a file, as client-go)."""
    return tuple(
        path
        for path, data in ((tls.ca_file, tls.ca_data), (tls.cert_file, tls.cert_data), (tls.key_file, tls.key_data))
        if path and not data
    )


def tls_context(tls: ExtenderTLSConfig) -> ssl.SSLContext:
    """Upstream ``TLSConfigFor``: TLS 1.2+; the CA given (else the system's), verification off only
    with ``insecure``; the client certificate if any. Raises ``OSError``/``ssl.SSLError`` for bad material."""
    ca = tls.ca_data.decode() if tls.ca_data else None
    ctx = ssl.create_default_context(cafile=None if ca else tls.ca_file or None, cadata=ca)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls.insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if tls.cert_data or tls.cert_file:
        with tempfile.TemporaryDirectory(prefix="kopf-scheduler-extender-") as tmp:  # ssl loads a chain from files only
            cert = _materialise(tmp, "tls.crt", tls.cert_data) or tls.cert_file
            key = _materialise(tmp, "tls.key", tls.key_data) or tls.key_file
            ctx.load_cert_chain(cert, key)
    return ctx


def _materialise(directory: str, name: str, data: bytes) -> str:
    if not data:
        return ""
    path = os.path.join(directory, name)
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
        f.write(data)
    return path


def setup_problems(configs: Sequence[ExtenderConfig]) -> list[FieldError]:
    """What keeps a client from being built (unreadable or invalid TLS material), at its policy field:
    the operator rejects such a policy, as upstream refuses to start."""
    problems = []
    for i, cfg in enumerate(configs):
        if not cfg.https:
            continue
        try:
            tls_context(cfg.tls)
        except (OSError, ssl.SSLError, ValueError) as exc:
            problems.append(FieldError(f"spec.extenders[{i}].tlsConfig", f"cannot set up TLS: {exc}"))
    return problems


class _HTTPSConnection(http.client.HTTPSConnection):
    """HTTPS whose certificate is checked against ``server_name`` (``tlsConfig.serverName``) when set."""

    def __init__(
        self, host: str, port: int | None, *, timeout: float, context: ssl.SSLContext, server_name: str
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._tls = context
        self._server_name = server_name

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock = self._tls.wrap_socket(self.sock, server_hostname=self._server_name or self.host)


# --------------------------------------------------------------------------- the client


class HTTPExtender(Extender):
    """One extender reached over HTTP(S); thread-safe (attempts and binds call it from worker threads)."""

    def __init__(self, config: ExtenderConfig) -> None:
        super().__init__(config)
        parts = urlsplit(config.url_prefix)
        self._host = parts.hostname or ""
        self._port = parts.port
        self._base = config.url_prefix.rstrip("/")
        self._path = parts.path.rstrip("/")
        self._timeout = config.http_timeout_seconds
        self._pool: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._tls: ssl.SSLContext | None = None
        self._tls_stamp: tuple[int, ...] | None = None
        #: node name -> (the Node it was made from, its JSON): a node is encoded again only when it changed
        self._node_texts: dict[str, tuple[Node, bytes]] = {}

    # ---- the calls

    def filter(self, pod: Pod, nodes: Sequence[NodeInfo]) -> ExtenderFilterResult:
        if not self.is_filter:
            return ExtenderFilterResult(tuple(n.name for n in nodes))
        try:
            data = self._send(self.config.filter_verb, self._args(pod, nodes))
        except ExtenderCallError as exc:
            return ExtenderFilterResult(error=str(exc))
        return decode_filter_result(data, node_cache_capable=self.config.node_cache_capable)

    def prioritize(self, pod: Pod, nodes: Sequence[NodeInfo]) -> ExtenderPrioritizeResult:
        if not self.is_prioritizer:
            return ExtenderPrioritizeResult(tuple(HostPriority(n.name, 0) for n in nodes))
        try:
            data = self._send(self.config.prioritize_verb, self._args(pod, nodes))
        except ExtenderCallError as exc:
            return ExtenderPrioritizeResult(error=str(exc))
        return decode_host_priorities(data)

    def bind(self, pod: Pod, node: str) -> str:
        if not self.is_binder:
            return "unexpected empty bindVerb in extender"
        try:
            data = self._send(self.config.bind_verb, encode_binding_args(pod, node))
        except ExtenderCallError as exc:
            return str(exc)
        return decode_binding_result(data)

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, []
        for conn in pool:
            conn.close()

    # ---- encoding

    def _args(self, pod: Pod, nodes: Sequence[NodeInfo]) -> bytes:
        if self.config.node_cache_capable:
            return encode_extender_args(pod_json(pod), node_names=[n.name for n in nodes])
        return encode_extender_args(pod_json(pod), nodes=self._node_jsons(nodes))

    def _node_jsons(self, infos: Sequence[NodeInfo]) -> list[bytes]:
        texts = self._node_texts
        if len(texts) > 2 * len(infos) + 256:  # forget nodes that are gone (or rarely sent)
            texts = self._node_texts = {}
        out = []
        for info in infos:
            node = info.node
            if node is None:
                out.append(to_json({"metadata": {"name": info.name}}))
                continue
            cached = texts.get(node.name)
            if cached is None or cached[0] is not node:
                cached = texts[node.name] = (node, node_json(node))
            out.append(cached[1])
        return out

    # ---- transport

    def _send(self, verb: str, body: bytes) -> Any:
        """POST `body` to the verb; the decoded JSON answer of a 200, else ``ExtenderCallError``."""
        url = f"{self._base}/{verb}"
        deadline = time.monotonic() + self._timeout
        for attempt in (0, 1):
            conn, reused = self._connection(url, deadline)
            try:
                status, text = self._exchange(conn, f"{self._path}/{verb}", body, deadline)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError) as exc:
                conn.close()
                if reused and attempt == 0:
                    continue  # the server closed an idle kept-alive connection: once more on a new one
                raise ExtenderCallError(f'Post "{url}": {_reason(exc)}') from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise ExtenderCallError(f'Post "{url}": {_reason(exc)}') from None
            break
        if status != 200:
            raise ExtenderCallError(f"failed {verb} with extender at URL {url}, code {status}")
        try:
            return json.loads(text) if text.strip() else None
        except ValueError as exc:
            raise ExtenderCallError(f"decoding the answer of {url}: {exc}") from None

    def _connection(self, url: str, deadline: float) -> tuple[http.client.HTTPConnection, bool]:
        with self._lock:
            if self._pool:
                return self._pool.pop(), True
        timeout = max(deadline - time.monotonic(), 0.001)
        if not self.config.https:
            return http.client.HTTPConnection(self._host, self._port, timeout=timeout), False
        try:
            ctx = self._context()
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise ExtenderCallError(f'Post "{url}": cannot set up TLS: {exc}') from None
        return _HTTPSConnection(
            self._host, self._port, timeout=timeout, context=ctx, server_name=self.config.tls.server_name
        ), False

    def _context(self) -> ssl.SSLContext:
        """The TLS context, built again when one of its files changed on disk."""
        files = _tls_files(self.config.tls)
        stamp = tuple(os.stat(f).st_mtime_ns for f in files)
        with self._lock:
            if self._tls is None or stamp != self._tls_stamp:
                self._tls, self._tls_stamp = tls_context(self.config.tls), stamp
                stale, self._pool = self._pool, []
            else:
                stale = []
            ctx = self._tls
        for conn in stale:
            conn.close()
        return ctx

    def _exchange(self, conn: http.client.HTTPConnection, path: str, body: bytes, deadline: float) -> tuple[int, str]:
        def remaining() -> float:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            return left

        conn.timeout = remaining()
        if conn.sock is None:
            conn.connect()
        assert conn.sock is not None
        conn.sock.settimeout(remaining())
        conn.request(
            "POST", path, body=body, headers={"Content-Type": "application/json", "Accept": "application/json"}
        )
        conn.sock.settimeout(remaining())
        resp = conn.getresponse()
        chunks = []
        while True:
            if conn.sock is not None:
                conn.sock.settimeout(remaining())
            chunk = resp.read(_READ_CHUNK)
            if not chunk:
                break
            chunks.append(chunk)
        kept = False
        if not resp.will_close:
            with self._lock:
                if len(self._pool) < POOL_SIZE:
                    self._pool.append(conn)
                    kept = True
        if not kept:
            conn.close()
        return resp.status, b"".join(chunks).decode("utf-8", errors="replace")


def _reason(exc: BaseException) -> str:
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return TIMEOUT_REASON
    return str(exc) or type(exc).__name__
