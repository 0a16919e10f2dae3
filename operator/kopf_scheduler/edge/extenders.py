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
code <status>``), so they read as upstream's in FailedScheduling events. The status rule is
upstream's: an answer is accepted only with status 200 (``STATUS_OK``), not any 2xx.

**Transport.** Each extender has its own keep-alive ``Pool`` of the edge's HTTP/1.1 client
(``edge/transport.py``, the one the API requests use): ``httpTimeout`` bounds the whole call
(connect, send, answer), as Go's ``Client.Timeout``; a filter or prioritize call that finds a
pooled connection closed by the server is sent once more on a new one, a bind is not (the
extender may have bound). TLS follows ``ExtenderTLSConfig`` (see ``core/config/extenders.py``):
certificate and CA files are re-read when they change on disk, so rotated certificates are picked
up, and the idle connections made with the old ones are closed.

Calls block: the operator makes them from a worker thread (an attempt's ``decide``, an extender's
bind), and the I/O runs on its event loop (``LoopBridge``; the App gives the loop when it builds the
extenders); ``simulate``, benchmarks and tests give none, and the calling thread runs a private loop
itself. Encoding and decoding stay in the calling thread. A decoded answer (or the failure)
is a value; nothing here raises for an extender's fault.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime as _dt
import json
import os
import ssl
import tempfile
import threading
from collections.abc import Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from ..core.config.extenders import (
    Extender,
    ExtenderConfig,
    ExtenderFilterResult,
    ExtenderPrioritizeResult,
    ExtenderTLSConfig,
    HostPriority,
)
from ..core.framework.nodeinfo import NodeInfo
from ..core.model.objects import Node, Pod
from ..core.model.specs import FieldError
from .transport import LoopBridge, Pool

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
#: Go's wording for a call given up before its answer (the process is stopping)
CANCELED_REASON: Final = "context canceled"
#: upstream's status rule for an extender's answer (``resp.StatusCode != http.StatusOK`` is an error)
STATUS_OK: Final = 200
#: connections open at once per extender (the operator's extender threads: 32)
CONNECTION_LIMIT: Final = 32
#: seconds a blocking caller waits beyond ``httpTimeout`` for the event loop to report (a busy loop)
_BRIDGE_GRACE: Final = 1.0


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


# --------------------------------------------------------------------------- the client


class HTTPExtender(Extender):
    """One extender reached over HTTP(S); thread-safe (attempts and binds call it from worker threads).

    `loop`: the running event loop its I/O goes through (the operator's); None: the caller's thread
    runs a private loop for each call.
    """

    def __init__(self, config: ExtenderConfig, *, loop: asyncio.AbstractEventLoop | None = None) -> None:
        super().__init__(config)
        parts = urlsplit(config.url_prefix)
        host = parts.hostname or ""
        self._base = config.url_prefix.rstrip("/")
        self._path = parts.path.rstrip("/")
        self._head = (
            f"Host: {parts.netloc.rpartition('@')[2]}\r\nUser-Agent: kopf-scheduler\r\n"
            "Content-Type: application/json\r\nAccept: application/json\r\n"
        )
        self._timeout = config.http_timeout_seconds
        self._pool = Pool(
            host,
            parts.port or (443 if config.https else 80),
            timeout=self._timeout,
            server_hostname=config.tls.server_name or None,
            connections=CONNECTION_LIMIT,
        )
        self._bridge = LoopBridge(loop)
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
            data = self._send(self.config.bind_verb, encode_binding_args(pod, node), replayable=False)
        except ExtenderCallError as exc:
            return str(exc)
        return decode_binding_result(data)

    def close(self) -> None:
        """Close the idle connections (a call in flight finishes first) and the own loop, if any."""
        self._bridge.close(self._pool.close)

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

    def _send(self, verb: str, body: bytes, *, replayable: bool = True) -> Any:
        """POST `body` to the verb; the decoded JSON answer of a 200, else ``ExtenderCallError``.
        `replayable`: may be sent again when a reused connection is lost before any answer."""
        url = f"{self._base}/{verb}"
        tls = None
        if self.config.https:
            try:
                tls = self._context()
            except (OSError, ssl.SSLError, ValueError) as exc:
                raise ExtenderCallError(f'Post "{url}": cannot set up TLS: {exc}') from None
        head = f"POST {self._path}/{verb} HTTP/1.1\r\n{self._head}Content-Length: {len(body)}\r\n\r\n"
        call = self._post(head.encode("latin-1") + body, tls, replayable)
        try:
            status, raw = self._bridge.run(call, timeout=self._timeout + _BRIDGE_GRACE)
        except (OSError, ValueError, RuntimeError, concurrent.futures.CancelledError) as exc:
            raise ExtenderCallError(f'Post "{url}": {_reason(exc)}') from None
        if status != STATUS_OK:
            raise ExtenderCallError(f"failed {verb} with extender at URL {url}, code {status}")
        text = raw.decode("utf-8", errors="replace")
        try:
            return json.loads(text) if text.strip() else None
        except ValueError as exc:
            raise ExtenderCallError(f"decoding the answer of {url}: {exc}") from None

    async def _post(self, request: bytes, tls: ssl.SSLContext | None, replayable: bool) -> tuple[int, bytes]:
        if tls is not None:
            self._pool.use_tls(tls)
        return await self._pool.send(request, replayable=replayable)

    def _context(self) -> ssl.SSLContext:
        """The TLS context, built again when one of its files changed on disk."""
        files = _tls_files(self.config.tls)
        stamp = tuple(os.stat(f).st_mtime_ns for f in files)
        with self._lock:
            if self._tls is None or stamp != self._tls_stamp:
                self._tls, self._tls_stamp = tls_context(self.config.tls), stamp
            return self._tls


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return TIMEOUT_REASON
    if isinstance(exc, concurrent.futures.CancelledError):
        return CANCELED_REASON
    return str(exc) or type(exc).__name__
