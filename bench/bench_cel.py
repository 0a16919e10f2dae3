"""CEL runtimes for DynamicResources' device selectors: compile and evaluate, per expression and per device.

    python bench/bench_cel.py                  # 5000 devices, every runtime installed
    python bench/bench_cel.py --devices 20000

Why it exists: DRA selectors (DeviceClass and claim ``selectors``) are CEL expressions evaluated per
candidate device, so the runtime decides what a pod with a claim costs. Three Python CEL runtimes
exist on PyPI; this measures them on the selectors DRA users write:

- ``cel-expr-python``: Google's C++ CEL runtime (the one ``core/dra/expressions.py`` uses, measured
  through that module, with its Kubernetes quantity / semver library and device conversion);
- ``cel-python`` (import ``celpy``): pure Python, with the same library written for it here;
- ``common-expression-language`` (import ``cel``): Rust (cel-rust); no ``cel.bind`` and no optional
  syntax (``.?``), both in the Kubernetes environment DRA uses, so measured for reference only.

For each runtime: the time to compile one expression (the cost per DeviceClass / claim, once: we
cache by text), the time to turn one device into the runtime's input (once per device per pod
cycle), and the time to evaluate each selector on one device (per device, per request). Every
runtime must agree on every verdict, which the run checks. Numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))

from kopf_scheduler.core.dra import expressions  # noqa: E402
from kopf_scheduler.core.dra.objects import Device, DeviceAttribute, DeviceCapacity  # noqa: E402

DRIVER = "gpu.example.com"
SELECTORS = {
    "driver ==": f'device.driver == "{DRIVER}"',
    "attributes": f'device.attributes["{DRIVER}"].model == "a100" && device.attributes["{DRIVER}"].index >= 2',
    "capacity quantity": f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0',
    "semver": f'device.attributes["{DRIVER}"].driverVersion.isGreaterThan(semver("1.2.0"))',
}


def make_devices(n: int) -> list[Device]:
    models = ("a100", "h100", "t4")
    return [
        Device(
            f"gpu-{i}",
            attributes={
                "model": DeviceAttribute("string", models[i % 3]),
                "index": DeviceAttribute("int", i % 8),
                "driverVersion": DeviceAttribute("version", f"1.{i % 4}.0"),
                "uuid": DeviceAttribute("string", f"GPU-{i:08d}"),
                "numa.example.com/node": DeviceAttribute("int", i % 2),
            },
            capacity={"memory": DeviceCapacity(Fraction((16 + 8 * (i % 6)) * 2**30))},
        )
        for i in range(n)
    ]


def timed(fn: Callable[[], Any], repeat: int) -> float:
    """Seconds per call, the median of a few rounds."""
    rounds = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(repeat):
            fn()
        rounds.append((time.perf_counter() - t0) / repeat)
    return statistics.median(rounds)


# --------------------------------------------------------------------------- runtimes


class ExprPython:
    name = "cel-expr-python (C++ runtime, core/dra/expressions.py)"

    def compile(self, text: str) -> Any:
        selector = expressions.compile_selector.__wrapped__(text)  # bypass the cache: a real compile
        assert selector.error is None, selector.error
        return selector

    def convert(self, device: Device) -> Any:
        data = expressions.device_input(DRIVER, device)
        data.activation((frozenset(), frozenset()))  # built once per device, shared by every selector
        return data

    def evaluate(self, program: Any, data: Any) -> bool:
        return bool(program.matches(data))


class CelPython:
    """cel-python with a Kubernetes quantity / semver library written for it."""

    name = "cel-python (pure Python, celpy)"

    def __init__(self) -> None:
        import celpy
        from celpy import celtypes

        self.celpy, self.celtypes = celpy, celtypes
        self.env = celpy.Environment()

        class Quantity:
            __slots__ = ("v",)

            def __init__(self, v: Fraction) -> None:
                self.v = v

            def __eq__(self, other: object) -> bool:
                return isinstance(other, Quantity) and self.v == other.v

            def __hash__(self) -> int:
                return hash(self.v)

        class Semver:
            __slots__ = ("k",)

            def __init__(self, k: Any) -> None:
                self.k = k

        self.Quantity, self.Semver = Quantity, Semver

        def order(x: Any) -> Any:
            return x.v if isinstance(x, Quantity) else expressions._semver_order(x.k)

        def compare(a: Any, b: Any) -> Any:
            x, y = order(a), order(b)
            return celtypes.IntType((x > y) - (x < y))

        self.functions = {
            "quantity": lambda s: Quantity(expressions.parse_quantity(str(s))),
            "semver": lambda s: Semver(expressions.parse_semver(str(s))),
            "compareTo": compare,
            "isGreaterThan": lambda a, b: celtypes.BoolType(order(a) > order(b)),
            "isLessThan": lambda a, b: celtypes.BoolType(order(a) < order(b)),
        }

    def compile(self, text: str) -> Any:
        return self.env.program(self.env.compile(text), functions=self.functions)

    def convert(self, device: Device) -> Any:
        t = self.celtypes
        attributes: dict[Any, Any] = {}
        for name, attr in device.attributes.items():
            domain, ident = expressions._split(name, DRIVER)
            if attr.kind == "version":
                value: Any = self.Semver(expressions.parse_semver(attr.value))
            elif attr.kind == "int":
                value = t.IntType(attr.value)
            elif attr.kind == "bool":
                value = t.BoolType(attr.value)
            else:
                value = t.StringType(attr.value)
            attributes.setdefault(t.StringType(domain), {})[t.StringType(ident)] = value
        capacity: dict[Any, Any] = {}
        for name, cap in device.capacity.items():
            domain, ident = expressions._split(name, DRIVER)
            capacity.setdefault(t.StringType(domain), {})[t.StringType(ident)] = self.Quantity(cap.value)
        return {
            "device": t.MapType(
                {
                    t.StringType("driver"): t.StringType(DRIVER),
                    t.StringType("attributes"): t.MapType({k: t.MapType(v) for k, v in attributes.items()}),
                    t.StringType("capacity"): t.MapType({k: t.MapType(v) for k, v in capacity.items()}),
                }
            )
        }

    def evaluate(self, program: Any, data: Any) -> bool:
        return bool(program.evaluate(data))


class CommonExpressionLanguage:
    name = "common-expression-language (Rust, cel-rust; no cel.bind, no .?)"

    def __init__(self) -> None:
        import cel

        self.cel = cel

        def compare(a: Any, b: Any) -> int:
            x, y = expressions._ordered(a, b)
            return (x > y) - (x < y)

        self.functions = {
            "quantity": expressions._string_to_quantity,
            "semver": expressions._string_to_semver,
            "compareTo": compare,
            "isGreaterThan": lambda a, b: compare(a, b) > 0,
            "isLessThan": lambda a, b: compare(a, b) < 0,
        }

    def compile(self, text: str) -> Any:
        return self.cel.compile(text)

    def convert(self, device: Device) -> Any:
        return self.cel.Context(
            variables={"device": expressions.device_input(DRIVER, device).data}, functions=self.functions
        )

    def evaluate(self, program: Any, data: Any) -> bool:
        return bool(program.execute(data))


def runtimes() -> list[Any]:
    out: list[Any] = [ExprPython()]
    for make in (CelPython, CommonExpressionLanguage):
        try:
            out.append(make())
        except ImportError as exc:
            print(f"skipped {make.__name__}: {exc}")
    return out


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=5000)
    args = parser.parse_args()
    devices = make_devices(args.devices)
    verdicts: dict[str, list[list[bool]]] = {}
    print(f"{args.devices} devices, {len(SELECTORS)} selectors")
    for rt in runtimes():
        print(f"\n{rt.name}")
        compile_s = statistics.mean(timed(lambda t=text, r=rt: r.compile(t), 20) for text in SELECTORS.values())
        print(f"  compile one expression           {compile_s * 1e6:9.1f} us")
        t0 = time.perf_counter()
        inputs = [rt.convert(d) for d in devices]
        convert_s = (time.perf_counter() - t0) / len(devices)
        print(f"  convert one device               {convert_s * 1e6:9.1f} us")
        verdicts[rt.name] = []
        total = 0.0
        for label, text in SELECTORS.items():
            program = rt.compile(text)
            t0 = time.perf_counter()
            out = [rt.evaluate(program, data) for data in inputs]
            per = (time.perf_counter() - t0) / len(devices)
            total += per
            verdicts[rt.name].append(out)
            print(f"  evaluate {label:<24}{per * 1e6:9.1f} us per device")
        print(
            f"  all {len(SELECTORS)} selectors over {args.devices} devices, conversion included: "
            f"{(total + convert_s) * args.devices * 1e3:.1f} ms"
        )
    first = next(iter(verdicts.values()))
    for name, got in verdicts.items():
        assert got == first, f"{name} disagrees"
    print("\nevery runtime agrees on every verdict")


if __name__ == "__main__":
    main()
