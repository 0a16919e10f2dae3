"""CEL device selectors (core/dra/expressions.py): the DRA environment and upstream's error texts."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kopf_scheduler.core.dra.expressions import CelError, compile_selector, device_input, parse_semver
from kopf_scheduler.core.dra.objects import Device, DeviceAttribute, DeviceCapacity

DRIVER = "gpu.example.com"
GPU = Device(
    "gpu-0",
    attributes={
        "model": DeviceAttribute("string", "a100"),
        "index": DeviceAttribute("int", 3),
        "driverVersion": DeviceAttribute("version", "1.2.3-rc.1"),
        "numa.example.com/node": DeviceAttribute("int", 1),
        "ok": DeviceAttribute("bool", True),
    },
    capacity={"memory": DeviceCapacity(Fraction(40 * 2**30))},
)
A = f'device.attributes["{DRIVER}"]'
C = f'device.capacity["{DRIVER}"]'


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        pytest.param(f'device.driver == "{DRIVER}"', True, id="driver"),
        pytest.param(f'{A}.model == "a100" && {A}.index >= 2 && {A}.ok', True, id="attributes"),
        pytest.param('device.attributes["numa.example.com"].node == 1', True, id="another domain"),
        pytest.param(f'{C}.memory.compareTo(quantity("40Gi")) == 0', True, id="compareTo"),
        pytest.param(f'{C}.memory == quantity("42949672960")', True, id="quantities equal by value"),
        pytest.param(f'{C}.memory.isGreaterThan(quantity("41Gi"))', False, id="isGreaterThan"),
        pytest.param(f'{C}.memory.isLessThan(quantity("41Gi"))', True, id="isLessThan"),
        pytest.param('quantity("1").add(2) == quantity("3000m")', True, id="add"),
        pytest.param('quantity("1500m").isInteger() == false && sign(quantity("-1")) == -1', True, id="sign isInteger"),
        pytest.param(f'{A}.driverVersion.isLessThan(semver("1.2.3"))', True, id="prerelease sorts before release"),
        pytest.param(f'{A}.driverVersion.isGreaterThan(semver("1.2.3-rc.0"))', True, id="prerelease order"),
        pytest.param('semver("v1.2", true).minor() == 2 && isSemver("1.0") == false', True, id="normalising semver"),
        pytest.param('has(device.attributes["other.io"].x)', False, id="unknown domain is an empty map"),
        pytest.param(f'{A}.?nope.orValue("z") == "z"', True, id="optional chaining"),
        pytest.param(f'cel.bind(g, {A}, g.model == "a100")', True, id="cel.bind"),
        pytest.param(f'{A}.model.startsWith("a1") && {A}.model.lowerAscii() == "a100"', True, id="strings"),
        pytest.param("device.allowMultipleAllocations", False, id="allowMultipleAllocations"),
    ],
)
def test_selectors(expression: str, expected: bool) -> None:
    selector = compile_selector(expression)
    assert selector.error is None
    assert selector.matches(device_input(DRIVER, GPU)) is expected


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        pytest.param(
            f"{A}.nope",
            "no such key: nope. consider using CEL optional chaining (.? followed by orValue()) "
            "or guarding the check with has() for optional fields",
            id="missing attribute",
        ),
        pytest.param(f"{A}.model > 1", "no such overload", id="type mismatch"),
    ],
)
def test_runtime_errors(expression: str, message: str) -> None:
    with pytest.raises(CelError) as err:
        compile_selector(expression).matches(device_input(DRIVER, GPU))
    assert str(err.value) == message


def test_compile_errors() -> None:
    assert (compile_selector("1").error or "") == "must evaluate to bool or the unknown type, not int"
    assert (compile_selector("device.driver ==").error or "").startswith("compilation failed: ERROR: <input>:1:")


def test_compiled_once_per_text() -> None:
    assert compile_selector('device.driver == "x"') is compile_selector('device.driver == "x"')


def test_bad_version_attribute_fails_every_selector() -> None:
    bad = Device("d", attributes={"v": DeviceAttribute("version", "1.0")})
    with pytest.raises(CelError, match="attribute v: parse semantic version: No Major.Minor.Patch elements found"):
        device_input(DRIVER, bad)


def test_semver_is_strict() -> None:
    assert parse_semver("1.0.0-alpha.1") == (1, 0, 0, ((1, "alpha"), (0, 1)))
    with pytest.raises(ValueError):
        parse_semver("01.0.0")
