"""CEL device selectors: DeviceClass and request ``selectors`` evaluated against one device.

Follows upstream ``k8s.io/dynamic-resource-allocation/cel`` (compile.go, cache.go, errors.go) with the
features v1.37 turns on by default (DRAConsumableCapacity: ``device.allowMultipleAllocations``; not
the alpha DRAListTypeAttributes). An expression sees one variable, ``device``:

- ``device.driver``: the driver's name; ``device.allowMultipleAllocations``: a bool;
- ``device.attributes["<domain>"].<id>``: the attribute's value (int, bool, string, or a semantic
  version); an attribute named without a domain is in the driver's domain;
- ``device.capacity["<domain>"].<id>``: the capacity as a Kubernetes quantity;
- an unknown domain reads as an empty map (upstream's ``mapper`` default); an unknown id in a known
  domain is a runtime error, ``no such key: <id>``, which upstream follows with a hint to use ``.?``
  or ``has()``;
- the Kubernetes quantity library (``quantity("1Gi")``, ``isQuantity``, ``sign``, ``.compareTo``,
  ``.isGreaterThan``, ``.isLessThan``, ``.add``, ``.sub``, ``.asInteger``, ``.isInteger``,
  ``.asApproximateFloat``) and semver library (``semver("1.2.3")``, ``semver(s, true)`` normalising,
  ``isSemver``, ``.major/.minor/.patch``, ``.compareTo``, ``.isGreaterThan``, ``.isLessThan``), and
  the CEL extensions the Kubernetes base environment has that matter to selectors: strings,
  ``cel.bind``, optional values (``.?``, ``orValue``) and math.

The runtime is ``cel-expr-python`` (Google's C++ CEL runtime; bench/bench_cel.py has the measurement
that chose it). It has no opaque values that Python creates, so a quantity is a map
``{"@q": "<numerator>/<denominator>"}`` (exact, so ``==`` compares values as upstream's does) and a
semantic version a map ``{"@semver": "<version without build metadata>"}``; the library functions
take and return those maps. Compiled programs are cached by expression text (``compile_selector``):
an expression compiles once per process, not per node or per pod.

Limits, all outside what DRA selectors use in practice: ``device`` is typed dynamically, so a
misspelt field (``device.drivr``) or a type error fails at run time on the first device instead of at
compile time; the Kubernetes libraries for lists, regex (``find``), URLs, IPs, CIDRs, ``format`` and
authz are absent (an expression using them fails to compile, with the runtime's message); runtime
error texts are upstream's for a missing key and a missing overload, the runtime's otherwise; the
empty-map default applies to the domains an expression names literally (``attributes["x"]``),
which is every form selectors use; the runtime cost limit is not enforced.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

import cel_expr_python.cel as cel
import cel_expr_python.ext.ext_bindings as ext_bindings
import cel_expr_python.ext.ext_math as ext_math
import cel_expr_python.ext.ext_optional as ext_optional
import cel_expr_python.ext.ext_strings as ext_strings

from ..model.resources import QuantityError, parse_quantity
from .objects import Device, DeviceAttribute

__all__ = [
    "CelError",
    "DeviceInput",
    "Selector",
    "compile_selector",
    "device_input",
    "parse_semver",
]

QUANTITY_TAG: Final = "@q"
SEMVER_TAG: Final = "@semver"

#: upstream ``EnhanceRuntimeError``'s hint after "no such key"
NO_SUCH_KEY_HINT: Final = (
    ". consider using CEL optional chaining (.? followed by orValue()) or guarding the check with has() "
    "for optional fields"
)


class CelError(Exception):
    """A selector that could not be evaluated on a device; the message is upstream's text."""


# --------------------------------------------------------------------------- semantic versions


_SEMVER_RE: Final = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)

SemverKey = tuple[int, int, int, tuple[tuple[int, int | str], ...]]


@functools.lru_cache(maxsize=1024)
def parse_semver(text: str) -> SemverKey:
    """blang/semver ``Parse`` (strict semver 2.0.0) as a comparable key: major, minor, patch, and the
    prerelease identifiers (a version without prerelease sorts after every prerelease of it).
    Raises ValueError with the library's message."""
    m = _SEMVER_RE.match(text)
    if m is None:
        if not text:
            raise ValueError("Version string empty")
        if len(text.split("-", 1)[0].split("+", 1)[0].split(".")) != 3:
            raise ValueError("No Major.Minor.Patch elements found")
        raise ValueError(f"Invalid version {text!r}")
    pre: tuple[tuple[int, int | str], ...] = ()
    if m[4]:
        pre = tuple((0, int(p)) if p.isdigit() else (1, p) for p in m[4].split("."))
    return int(m[1]), int(m[2]), int(m[3]), pre


def _semver_order(key: SemverKey) -> tuple[Any, ...]:
    major, minor, patch, pre = key
    # no prerelease sorts last; identifiers: numeric < alphanumeric, shorter prefix first
    return (major, minor, patch, 1 if not pre else 0, pre)


def _semver_text(key: SemverKey) -> str:
    major, minor, patch, pre = key
    text = f"{major}.{minor}.{patch}"
    if pre:
        text += "-" + ".".join(str(v) for _, v in pre)
    return text


def _normalize_semver(text: str) -> str:
    """k8s ``normalizeAndParse``: drop a leading "v", pad missing minor / patch with 0, drop leading zeros."""
    text = text.removeprefix("v")
    core, sep, rest = text, "", ""
    for mark in ("-", "+"):
        if mark in core:
            core, rest = core.split(mark, 1)
            sep = mark
            break
    parts = core.split(".")
    while len(parts) < 3:
        parts.append("0")
    parts = [p.lstrip("0") or "0" if p.isdigit() else p for p in parts]
    return ".".join(parts) + (sep + rest if sep else "")


def _semver(key: SemverKey) -> dict[str, str]:
    return {SEMVER_TAG: _semver_text(key)}


# --------------------------------------------------------------------------- library functions


def _quantity_value(value: Fraction) -> dict[str, str]:
    return {QUANTITY_TAG: f"{value.numerator}/{value.denominator}"}


@functools.lru_cache(maxsize=4096)
def _fraction(text: str) -> Fraction:
    return Fraction(text)


def _as_quantity(value: Any) -> Fraction:
    if isinstance(value, Mapping) and QUANTITY_TAG in value:
        return _fraction(value[QUANTITY_TAG])
    raise TypeError("no such overload")


def _as_semver(value: Any) -> SemverKey:
    if isinstance(value, Mapping) and SEMVER_TAG in value:
        return parse_semver(value[SEMVER_TAG])
    raise TypeError("no such overload")


def _ordered(a: Any, b: Any) -> tuple[Any, Any]:
    """Two quantities, or two versions, as comparable values."""
    if isinstance(a, Mapping) and QUANTITY_TAG in a:
        return _as_quantity(a), _as_quantity(b)
    return _semver_order(_as_semver(a)), _semver_order(_as_semver(b))


def _compare(a: Any, b: Any) -> int:
    x, y = _ordered(a, b)
    return int(x > y) - int(x < y)


@functools.lru_cache(maxsize=1024)
def _parsed_quantity(text: str) -> dict[str, str]:
    """A parsed literal (the same few strings recur: "40Gi"); callers never mutate the map."""
    try:
        return _quantity_value(parse_quantity(text))
    except QuantityError:
        raise ValueError(
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        ) from None


def _string_to_quantity(text: str) -> dict[str, str]:
    return _parsed_quantity(text)


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _as_integer(q: Any) -> int:
    v = _as_quantity(q)
    if v.denominator != 1 or not -(2**63) <= v.numerator < 2**63:
        raise ValueError("cannot convert value to integer")
    return v.numerator


def _is_integer(q: Any) -> bool:
    v = _as_quantity(q)
    return v.denominator == 1 and -(2**63) <= v.numerator < 2**63


def _sign(q: Any) -> int:
    v = _as_quantity(q)
    return (v > 0) - (v < 0)


def _add(a: Any, b: Any) -> dict[str, str]:
    return _quantity_value(_as_quantity(a) + (Fraction(b) if isinstance(b, int) else _as_quantity(b)))


def _sub(a: Any, b: Any) -> dict[str, str]:
    return _quantity_value(_as_quantity(a) - (Fraction(b) if isinstance(b, int) else _as_quantity(b)))


def _string_to_semver(text: str) -> dict[str, str]:
    return _semver(parse_semver(text))


def _string_to_semver_normalize(text: str, normalize: bool) -> dict[str, str]:
    return _semver(parse_semver(_normalize_semver(text) if normalize else text))


def _is_semver(text: str) -> bool:
    try:
        parse_semver(text)
    except ValueError:
        return False
    return True


def _is_semver_normalize(text: str, normalize: bool) -> bool:
    return _is_semver(_normalize_semver(text) if normalize else text)


def _library() -> list[cel.FunctionDecl]:
    T = cel.Type
    Q = T.MAP  # a quantity or a version: see the module docstring

    def fn(name: str, *overloads: tuple[str, list[cel.Type], cel.Type, bool, Any]) -> cel.FunctionDecl:
        return cel.FunctionDecl(
            name,
            [
                cel.Overload(oid, return_type=ret, parameters=params, is_member=member, impl=impl)
                for oid, params, ret, member, impl in overloads
            ],
        )

    return [
        fn("quantity", ("string_to_quantity", [T.STRING], Q, False, _string_to_quantity)),
        fn("isQuantity", ("is_quantity_string", [T.STRING], T.BOOL, False, _is_quantity)),
        fn("sign", ("quantity_sign", [Q], T.INT, False, _sign)),
        fn("isGreaterThan", ("map_is_greater_than", [Q, Q], T.BOOL, True, lambda a, b: _compare(a, b) > 0)),
        fn("isLessThan", ("map_is_less_than", [Q, Q], T.BOOL, True, lambda a, b: _compare(a, b) < 0)),
        fn("compareTo", ("map_compare_to", [Q, Q], T.INT, True, _compare)),
        fn("asApproximateFloat", ("quantity_get_float", [Q], T.DOUBLE, True, lambda q: float(_as_quantity(q)))),
        fn("asInteger", ("quantity_get_int", [Q], T.INT, True, _as_integer)),
        fn("isInteger", ("quantity_is_integer", [Q], T.BOOL, True, _is_integer)),
        fn("add", ("quantity_add", [Q, Q], Q, True, _add), ("quantity_add_int", [Q, T.INT], Q, True, _add)),
        fn("sub", ("quantity_sub", [Q, Q], Q, True, _sub), ("quantity_sub_int", [Q, T.INT], Q, True, _sub)),
        fn(
            "semver",
            ("string_to_semver", [T.STRING], Q, False, _string_to_semver),
            ("string_bool_to_semver", [T.STRING, T.BOOL], Q, False, _string_to_semver_normalize),
        ),
        fn(
            "isSemver",
            ("is_semver_string", [T.STRING], T.BOOL, False, _is_semver),
            ("is_semver_string_bool", [T.STRING, T.BOOL], T.BOOL, False, _is_semver_normalize),
        ),
        fn("major", ("semver_major", [Q], T.INT, True, lambda v: _as_semver(v)[0])),
        fn("minor", ("semver_minor", [Q], T.INT, True, lambda v: _as_semver(v)[1])),
        fn("patch", ("semver_patch", [Q], T.INT, True, lambda v: _as_semver(v)[2])),
    ]


@functools.cache
def _environment() -> cel.Env:
    extensions = [ext_bindings.ExtBindings(), ext_optional.ExtOptional(), ext_strings.ExtStrings(), ext_math.ExtMath()]
    return cel.NewEnv(variables={"device": cel.Type.DYN}, extensions=extensions, functions=_library())


# --------------------------------------------------------------------------- selectors


_NO_DOMAINS: Final[tuple[frozenset[str], frozenset[str]]] = (frozenset(), frozenset())
_DOMAIN_RE: Final = re.compile(r"""\.(attributes|capacity)\s*\[\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*\]""")
_STATUS_PREFIX_RE: Final = re.compile(r"^[A-Z_]+: ")
_STATUS_SUFFIX_RE: Final = re.compile(r" \[[A-Z_]+\]$")
_MISSING_KEY_RE: Final = re.compile(r'^NOT_FOUND: Key not found in map : "?(.*?)"?$')


def _runtime_message(raw: str) -> str:
    m = _MISSING_KEY_RE.match(raw)
    if m is not None:
        return f"no such key: {m[1]}{NO_SUCH_KEY_HINT}"
    if "No matching overloads" in raw or raw.endswith("no such overload"):
        return "no such overload"
    return _STATUS_PREFIX_RE.sub("", raw, count=1)


@dataclass(frozen=True, slots=True, eq=False)
class Selector:
    """One compiled expression: ``error`` (the compile error's text) or a program."""

    expression: str
    error: str | None
    program: Any = None
    #: the attribute / capacity domains the expression names literally (they read as empty maps when absent)
    domains: tuple[frozenset[str], frozenset[str]] = (frozenset(), frozenset())

    def matches(self, device: DeviceInput) -> bool:
        """The verdict on one device; raises ``CelError`` on a runtime error."""
        result = self.program.eval(activation=device.activation(self.domains))
        kind = result.type()
        if kind == cel.Type.BOOL:
            return bool(result.value())
        if kind == cel.Type.ERROR:
            raise CelError(_runtime_message(str(result.value())))
        name = kind.name().lower()
        raise CelError(
            f"CEL result of type {name} could not be converted to bool: type conversion error from '{name}' to 'bool'"
        )


class DeviceInput:
    """The value of ``device`` for one device, converted once and shared by every selector evaluated on it."""

    __slots__ = ("data", "_activations")

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self._activations: dict[tuple[frozenset[str], frozenset[str]], Any] = {}

    def activation(self, domains: tuple[frozenset[str], frozenset[str]]) -> Any:
        """The runtime's input, with an empty map for each named domain the device lacks."""
        act = self._activations.get(domains)
        if act is None:
            attrs, caps = domains
            have_a, have_c = self.data["attributes"], self.data["capacity"]
            missing_a = [d for d in attrs if d not in have_a]
            missing_c = [d for d in caps if d not in have_c]
            if not missing_a and not missing_c:
                act = self._activations.get(_NO_DOMAINS)
                if act is None:
                    act = self._activations[_NO_DOMAINS] = _environment().Activation({"device": self.data})
            else:
                data = dict(self.data)
                data["attributes"] = {**have_a, **dict.fromkeys(missing_a, {})}
                data["capacity"] = {**have_c, **dict.fromkeys(missing_c, {})}
                act = _environment().Activation({"device": data})
            self._activations[domains] = act
        return act


@functools.lru_cache(maxsize=1024)
def compile_selector(expression: str) -> Selector:
    """Upstream ``Cache.GetOrCompile``: the compiled selector, cached by its text."""
    try:
        program = _environment().compile(expression)
    except RuntimeError as exc:
        detail = _STATUS_SUFFIX_RE.sub("", _STATUS_PREFIX_RE.sub("", str(exc), count=1))
        return Selector(expression, f"compilation failed: {detail}")
    out = program.return_type()
    if out != cel.Type.BOOL and out != cel.Type.DYN:
        return Selector(expression, f"must evaluate to bool or the unknown type, not {out.name().lower()}")
    attrs: set[str] = set()
    caps: set[str] = set()
    for m in _DOMAIN_RE.finditer(expression):
        (attrs if m[1] == "attributes" else caps).add(m[2] if m[2] is not None else m[3])
    return Selector(expression, None, program, (frozenset(attrs), frozenset(caps)))


def _split(name: str, driver: str) -> tuple[str, str]:
    """Upstream ``parseQualifiedName``: ``domain/id``, or the driver's domain for a bare id."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(name: str, attr: DeviceAttribute) -> Any:
    kind = attr.kind
    try:
        if kind == "version":
            return _semver(parse_semver(attr.value))
        if kind == "versions":
            return [_semver(parse_semver(v)) for v in attr.value]
    except ValueError as exc:
        raise CelError(f"attribute {name}: parse semantic version: {exc}") from None
    if kind in ("ints", "bools", "strings"):
        return list(attr.value)
    return attr.value


def device_input(driver: str, device: Device) -> DeviceInput:
    """The value of ``device`` for `device` of a slice of `driver` (upstream ``DeviceMatches``'s input).

    Raises ``CelError`` for a version attribute that is not a semantic version (upstream fails every
    selector on such a device)."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, attr in device.attributes.items():
        domain, ident = _split(name, driver)
        attributes.setdefault(domain, {})[ident] = _attribute_value(name, attr)
    capacity: dict[str, dict[str, Any]] = {}
    for name, cap in device.capacity.items():
        domain, ident = _split(name, driver)
        capacity.setdefault(domain, {})[ident] = _quantity_value(cap.value)
    return DeviceInput(
        {
            "driver": driver,
            "allowMultipleAllocations": bool(device.allow_multiple_allocations),
            "attributes": attributes,
            "capacity": capacity,
        }
    )
