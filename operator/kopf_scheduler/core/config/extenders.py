"""HTTP extenders: their validated configuration, what the algorithm calls, and the bind decision.

References: v1.9 ``plugin/pkg/scheduler/api/types.go`` (``ExtenderConfig``); today's
``pkg/scheduler/apis/config/types.go`` (``Extender``) and ``validation/validation.go``
(``validateExtenders``); ``pkg/scheduler/extender.go`` (``HTTPExtender``: capabilities,
``IsInterested``); ``pkg/scheduler/scheduler.go`` (``buildExtenders``: ignorable extenders last);
``schedule_one.go`` (``extendersBinding``).

Validation rules: ``urlPrefix`` is an ``http://`` or ``https://`` URL; a ``prioritizeVerb`` needs a
positive ``weight`` (default 1); at most one extender may have a ``bindVerb``; ``httpTimeout`` is a
duration ("5s", "1m30s", "500ms") or a number of seconds (default 5 s); ``managedResources`` are
extended resource names, each managed by one extender. Decisions (marked * where upstream differs):

- *TLS is verified by default: an ``https://`` extender is checked against ``caFile``/``caData``, or
  the system's trust store without them, unless ``tlsConfig.insecure``. (Upstream turns
  verification off for ``enableHttps`` without a CA.) ``enableHttps`` therefore only asserts that the
  URL is ``https://``; *a ``tlsConfig`` on an ``http://`` extender, a client certificate without its
  key and ``insecure`` with a CA are rejected instead of ignored.
- *``preemptVerb`` is known but rejected: preemption does not call extenders yet.

Pure: ``Extender`` is the interface the algorithm calls synchronously; the HTTP implementation
lives at the edge (``kopf_scheduler/edge/extenders.py``), so does the I/O.
"""

from __future__ import annotations

import abc
import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ..framework.basics import MAX_EXTENDER_PRIORITY, MAX_NODE_SCORE, SUCCESS, Status, error
from ..model.specs import FieldError, is_int, parse_duration, unknown_keys
from ..plugins.node_resources_fit import is_extended_resource

if TYPE_CHECKING:
    from ..framework.nodeinfo import NodeInfo
    from ..model.objects import Pod

__all__ = [
    "EXTENDER_KEYS",
    "EXTENDER_SCORE_SCALE",
    "MANAGED_RESOURCE_KEYS",
    "TLS_KEYS",
    "Extender",
    "ExtenderBinding",
    "ExtenderConfig",
    "ExtenderFilterResult",
    "ExtenderPrioritizeResult",
    "ExtenderTLSConfig",
    "HostPriority",
    "bind_with_extenders",
    "binds_with_extender",
    "validate_extenders",
]

DEFAULT_EXTENDER_TIMEOUT_SECONDS: Final = 5.0
#: extender weights, as priority weights
MAX_EXTENDER_WEIGHT: Final = 1_000_000
#: an extender's 0..MAX_EXTENDER_PRIORITY score times this is on the plugins' 0..MAX_NODE_SCORE scale
EXTENDER_SCORE_SCALE: Final = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY

EXTENDER_KEYS: Final = (
    "urlPrefix",
    "filterVerb",
    "preemptVerb",
    "prioritizeVerb",
    "bindVerb",
    "weight",
    "enableHttps",
    "tlsConfig",
    "httpTimeout",
    "nodeCacheCapable",
    "managedResources",
    "ignorable",
)
TLS_KEYS: Final = ("insecure", "serverName", "certFile", "keyFile", "caFile", "certData", "keyData", "caData")
MANAGED_RESOURCE_KEYS: Final = ("name", "ignoredByScheduler")

T = TypeVar("T")

_URL: Final = re.compile(r"^(?P<scheme>https?)://[^\s/?#]+[^\s]*$")
#: apimachinery ``IsQualifiedName``: an optional DNS-subdomain prefix and "/", then a name of at most 63 characters
_QUALIFIED_NAME: Final = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)


@dataclass(frozen=True, slots=True)
class ExtenderTLSConfig:
    """Client TLS for an ``https://`` extender (upstream ``ExtenderTLSConfig``); ``*_data`` are PEM bytes."""

    insecure: bool = False
    server_name: str = ""
    ca_file: str = ""
    ca_data: bytes = b""
    cert_file: str = ""
    cert_data: bytes = b""
    key_file: str = ""
    key_data: bytes = field(default=b"", repr=False)


@dataclass(frozen=True, slots=True)
class ExtenderConfig:
    """One HTTP extender: the edge builds its client from this, the core reads its capabilities."""

    url_prefix: str
    filter_verb: str = ""
    prioritize_verb: str = ""
    bind_verb: str = ""
    weight: int = 1
    enable_https: bool = False
    tls: ExtenderTLSConfig = ExtenderTLSConfig()
    http_timeout_seconds: float = DEFAULT_EXTENDER_TIMEOUT_SECONDS
    node_cache_capable: bool = False
    ignorable: bool = False
    #: extended resources this extender manages: it is called only for pods that request one
    managed_resources: tuple[str, ...] = ()
    #: the managed resources NodeResourcesFit does not check (``ignoredByScheduler``)
    ignored_by_scheduler: tuple[str, ...] = ()

    @property
    def https(self) -> bool:
        return self.url_prefix.startswith("https://")


# --------------------------------------------------------------------------- validation


def validate_extenders(value: Any, errors: list[FieldError]) -> tuple[list[ExtenderConfig], list[dict[str, Any]]]:
    """``spec.extenders`` -> configurations and their normalised form; problems go to ``errors``."""
    configs: list[ExtenderConfig] = []
    normal: list[dict[str, Any]] = []
    if value is None:
        return configs, normal
    if not isinstance(value, list):
        errors.append(FieldError("spec.extenders", "must be a list"))
        return configs, normal
    binder: str | None = None
    managed_by: dict[str, str] = {}
    for i, ext in enumerate(value):
        path = f"spec.extenders[{i}]"
        if not isinstance(ext, Mapping):
            errors.append(FieldError(path, "must be an object"))
            continue
        before = len(errors)
        unknown_keys(ext, EXTENDER_KEYS, path, errors)
        url = ext.get("urlPrefix")
        match = _url_match(url, path, errors)
        https = match is not None and match["scheme"] == "https"
        verbs = _typed(ext, ("filterVerb", "preemptVerb", "prioritizeVerb", "bindVerb"), str, "", path, errors)
        if verbs["preemptVerb"]:
            errors.append(FieldError(f"{path}.preemptVerb", "not supported yet: preemption does not call extenders"))
        weight = _weight(ext.get("weight"), path, errors)
        if verbs["prioritizeVerb"] and weight <= 0:
            errors.append(FieldError(f"{path}.weight", "an extender with a prioritizeVerb needs a positive weight"))
        if verbs["bindVerb"]:
            if binder is not None:
                errors.append(
                    FieldError(f"{path}.bindVerb", f"only one extender may bind; {binder} already has a bindVerb")
                )
            else:
                binder = path
        flags = _typed(ext, ("enableHttps", "nodeCacheCapable", "ignorable"), bool, False, path, errors)
        if flags["enableHttps"] and match is not None and not https:
            errors.append(FieldError(f"{path}.enableHttps", "needs an https:// urlPrefix"))
        timeout = _http_timeout(ext, path, errors)
        tls = ExtenderTLSConfig()
        if ext.get("tlsConfig") is not None:
            if match is not None and not https:
                errors.append(FieldError(f"{path}.tlsConfig", "applies to https:// extenders only"))
            tls = _tls_config(ext["tlsConfig"], f"{path}.tlsConfig", errors)
        managed, ignored = _managed_resources(ext.get("managedResources", []), path, managed_by, errors)
        if len(errors) != before:
            continue
        configs.append(
            ExtenderConfig(
                url_prefix=str(url),
                filter_verb=verbs["filterVerb"],
                prioritize_verb=verbs["prioritizeVerb"],
                bind_verb=verbs["bindVerb"],
                weight=weight,
                enable_https=flags["enableHttps"],
                tls=tls,
                http_timeout_seconds=timeout,
                node_cache_capable=flags["nodeCacheCapable"],
                ignorable=flags["ignorable"],
                managed_resources=managed,
                ignored_by_scheduler=ignored,
            )
        )
        normal.append(
            {k: ext[k] for k in EXTENDER_KEYS if k in ext} | {"weight": weight, "httpTimeout": _render_seconds(timeout)}
        )
    return configs, normal


def _url_match(url: Any, path: str, errors: list[FieldError]) -> re.Match[str] | None:
    """``urlPrefix`` matched against the URL pattern (its scheme group), or None with the error said."""
    match = _URL.match(url) if isinstance(url, str) else None
    if not isinstance(url, str) or not url:
        errors.append(FieldError(f"{path}.urlPrefix", "required: a non-empty URL"))
    elif match is None:
        errors.append(FieldError(f"{path}.urlPrefix", f"must be an http:// or https:// URL, got {url!r}"))
    return match


def _typed(
    ext: Mapping[str, Any], keys: Sequence[str], kind: type[T], default: T, path: str, errors: list[FieldError]
) -> dict[str, T]:
    """The `keys` of `ext` that must be of one type (strings, booleans): `default` when absent or wrong."""
    wording = "a boolean" if kind is bool else "a string"
    found: dict[str, T] = {}
    for key in keys:
        value = ext.get(key, default)
        if not isinstance(value, kind):
            errors.append(FieldError(f"{path}.{key}", f"must be {wording}"))
            value = default
        found[key] = value
    return found


def _weight(weight: Any, path: str, errors: list[FieldError]) -> int:
    if weight is None:
        return 1
    if not is_int(weight) or weight > MAX_EXTENDER_WEIGHT or weight < 0:
        errors.append(
            FieldError(f"{path}.weight", f"must be an integer from 1 to {MAX_EXTENDER_WEIGHT}, got {weight!r}")
        )
        return 1
    return int(weight)


def _http_timeout(ext: Mapping[str, Any], path: str, errors: list[FieldError]) -> float:
    if "httpTimeout" not in ext:
        return DEFAULT_EXTENDER_TIMEOUT_SECONDS
    parsed = parse_duration(ext["httpTimeout"])
    if parsed is None or parsed <= 0:
        errors.append(
            FieldError(
                f"{path}.httpTimeout",
                f'must be a positive duration such as "5s" or a number of seconds, got {ext["httpTimeout"]!r}',
            )
        )
        return DEFAULT_EXTENDER_TIMEOUT_SECONDS
    return parsed


def _tls_config(value: Any, path: str, errors: list[FieldError]) -> ExtenderTLSConfig:
    if not isinstance(value, Mapping):
        errors.append(FieldError(path, "must be an object"))
        return ExtenderTLSConfig()
    unknown_keys(value, TLS_KEYS, path, errors)
    insecure = value.get("insecure", False)
    if not isinstance(insecure, bool):
        errors.append(FieldError(f"{path}.insecure", "must be a boolean"))
        insecure = False
    text: dict[str, str] = {}
    for key in ("serverName", "caFile", "certFile", "keyFile"):
        v = value.get(key, "")
        if not isinstance(v, str):
            errors.append(FieldError(f"{path}.{key}", "must be a string"))
            v = ""
        text[key] = v
    data: dict[str, bytes] = {}
    for key in ("caData", "certData", "keyData"):
        v = value.get(key, "")
        try:
            data[key] = base64.b64decode(v, validate=True) if isinstance(v, str) else b""
        except (binascii.Error, ValueError):
            data[key] = b""
            errors.append(FieldError(f"{path}.{key}", "must be base64-encoded PEM"))
            continue
        if not isinstance(v, str):
            errors.append(FieldError(f"{path}.{key}", "must be a base64 string"))
    if insecure and (text["caFile"] or data["caData"]):
        errors.append(
            FieldError(f"{path}.insecure", "specifying a root certificates file with the insecure flag is not allowed")
        )
    has_cert, has_key = bool(text["certFile"] or data["certData"]), bool(text["keyFile"] or data["keyData"])
    if has_cert != has_key:
        missing = "keyFile or keyData" if has_cert else "certFile or certData"
        errors.append(
            FieldError(path, f"a client certificate needs both a certificate and a key: {missing} is missing")
        )
    return ExtenderTLSConfig(
        insecure=insecure,
        server_name=text["serverName"],
        ca_file=text["caFile"],
        ca_data=data["caData"],
        cert_file=text["certFile"],
        cert_data=data["certData"],
        key_file=text["keyFile"],
        key_data=data["keyData"],
    )


def _managed_resources(
    value: Any, path: str, managed_by: dict[str, str], errors: list[FieldError]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if not isinstance(value, list):
        errors.append(FieldError(f"{path}.managedResources", "must be a list"))
        return (), ()
    managed: list[str] = []
    ignored: list[str] = []
    for j, res in enumerate(value):
        rpath = f"{path}.managedResources[{j}]"
        if not isinstance(res, Mapping):
            errors.append(FieldError(rpath, "must be an object with a name"))
            continue
        unknown_keys(res, MANAGED_RESOURCE_KEYS, rpath, errors)
        rname = res.get("name")
        if not isinstance(rname, str) or not rname:
            errors.append(FieldError(f"{rpath}.name", "required: a resource name"))
            continue
        if not _QUALIFIED_NAME.match(rname) or not is_extended_resource(rname):
            errors.append(
                FieldError(
                    f"{rpath}.name",
                    f"{rname!r} is an invalid extended resource name"
                    " (a domain-prefixed name outside kubernetes.io, such as example.com/gpu)",
                )
            )
            continue
        if rname in managed_by:
            errors.append(
                FieldError(
                    f"{rpath}.name", f"duplicate extender managed resource name: {managed_by[rname]} manages it already"
                )
            )
            continue
        managed_by[rname] = f"{rpath}.name"
        flag = res.get("ignoredByScheduler", False)
        if not isinstance(flag, bool):
            errors.append(FieldError(f"{rpath}.ignoredByScheduler", "must be a boolean"))
        elif flag:
            ignored.append(rname)
        managed.append(rname)
    return tuple(managed), tuple(ignored)


def _render_seconds(seconds: float) -> str:
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    if seconds * 1000 == int(seconds * 1000):
        return f"{int(seconds * 1000)}ms"
    return f"{seconds:g}s"


# --------------------------------------------------------------------------- what the algorithm calls


@dataclass(frozen=True, slots=True)
class ExtenderFilterResult:
    """A filter call's answer (upstream ``ExtenderFilterResult``, decoded), or why the call failed.

    ``nodes`` are the names that pass, in the extender's order; ``failed`` and
    ``failed_and_unresolvable`` map rejected names to the reason users read (the latter wins when a
    node is in both). ``error`` is set when the call failed: transport, HTTP status, the extender's
    own ``Error``, or a node it was not sent.
    """

    nodes: tuple[str, ...] = ()
    failed: Mapping[str, str] = field(default_factory=dict)
    failed_and_unresolvable: Mapping[str, str] = field(default_factory=dict)
    error: str = ""


@dataclass(frozen=True, slots=True)
class HostPriority:
    """One node's extender score, 0..MAX_EXTENDER_PRIORITY by contract (not clamped, as upstream)."""

    host: str
    score: int


@dataclass(frozen=True, slots=True)
class ExtenderPrioritizeResult:
    """A prioritize call's answer (upstream ``HostPriorityList``), or why the call failed."""

    scores: tuple[HostPriority, ...] = ()
    error: str = ""


class Extender(abc.ABC):
    """An extender as the algorithm sees it (upstream ``framework.Extender``).

    Capabilities come from the configuration; ``filter``, ``prioritize`` and ``bind`` are the calls,
    synchronous and returning values: a failure is a result with ``error`` set, never an exception.
    The operator runs attempts whose profile has extenders in a worker thread.
    """

    def __init__(self, config: ExtenderConfig) -> None:
        self.config = config
        self._managed = frozenset(config.managed_resources)

    @property
    def name(self) -> str:
        """The URL prefix, which is how upstream names an extender."""
        return self.config.url_prefix

    @property
    def is_filter(self) -> bool:
        return bool(self.config.filter_verb)

    @property
    def is_prioritizer(self) -> bool:
        return bool(self.config.prioritize_verb)

    @property
    def is_binder(self) -> bool:
        return bool(self.config.bind_verb)

    @property
    def is_ignorable(self) -> bool:
        return self.config.ignorable

    @property
    def weight(self) -> int:
        return self.config.weight

    def is_interested(self, pod: Pod) -> bool:
        """Upstream ``IsInterested``: every pod without managed resources; else pods whose containers or
        init containers request or limit one of them."""
        if not self._managed:
            return True
        for c in pod.containers + pod.init_containers:
            if any(r in self._managed for r in c.requests.scalar) or any(r in self._managed for r in c.limits.scalar):
                return True
        return False

    @abc.abstractmethod
    def filter(self, pod: Pod, nodes: Sequence[NodeInfo]) -> ExtenderFilterResult: ...

    @abc.abstractmethod
    def prioritize(self, pod: Pod, nodes: Sequence[NodeInfo]) -> ExtenderPrioritizeResult: ...

    @abc.abstractmethod
    def bind(self, pod: Pod, node: str) -> str:
        """Bind ``pod`` to ``node`` through the extender: "" when bound, else the error."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


@dataclass(frozen=True, slots=True)
class ExtenderBinding:
    """What ``bind_with_extenders`` did: ``status`` is None when no extender bound the pod (bind
    through the API server), else SUCCESS or the binder's error; ``skipped`` are the errors of
    ignorable binders passed over (for the log)."""

    status: Status | None
    binder: str = ""
    skipped: tuple[str, ...] = ()


def binds_with_extender(extenders: Sequence[Extender], pod: Pod) -> bool:
    """Whether an extender may bind ``pod`` (a binder interested in it): the edge then runs
    ``bind_with_extenders`` off the event loop."""
    return any(e.is_binder and e.is_interested(pod) for e in extenders)


def bind_with_extenders(extenders: Sequence[Extender], pod: Pod, node: str) -> ExtenderBinding:
    """Upstream ``extendersBinding``: the first binder interested in the pod binds it; an ignorable
    binder's failure passes the pod on (to the next binder, then to the default binding)."""
    skipped: list[str] = []
    for ext in extenders:
        if not ext.is_binder or not ext.is_interested(pod):
            continue
        try:
            problem = ext.bind(pod, node)
        except Exception as exc:  # an Extender bug: report it as the bind's error
            problem = f"{type(exc).__name__}: {exc}"
        if problem and ext.is_ignorable:
            skipped.append(f"{ext.name}: {problem}")
            continue
        return ExtenderBinding(error(problem) if problem else SUCCESS, ext.name, tuple(skipped))
    return ExtenderBinding(None, "", tuple(skipped))
