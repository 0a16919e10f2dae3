"""A plugin names its arguments type on its extension points (``FilterPlugin[FooArgs]``): ``Args`` follows.

What a type checker makes of it (``self.args`` is a ``FooArgs``, ``Foo(BarArgs())`` is an error) is
checked by mypy over the in-tree plugins and the example plugin; here, what happens at run time: the
class's ``Args`` is the named type, a policy's raw arguments are parsed into it, and a class that names
two types, or names one and sets another ``Args``, is refused when it is defined.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kopf_scheduler.core.config.policy import validate_policy
from kopf_scheduler.core.config.profile import Profile
from kopf_scheduler.core.config.registry import Registry
from kopf_scheduler.framework import (
    SUCCESS,
    CycleState,
    FilterPlugin,
    NoArgs,
    NodeInfo,
    PluginArgsError,
    Pod,
    ScorePlugin,
    Status,
)


@dataclass(frozen=True, slots=True)
class ZoneArgs:
    zone: str = "a"

    def __post_init__(self) -> None:
        if not self.zone:
            raise PluginArgsError("zone", "must not be empty")


@dataclass(frozen=True, slots=True)
class OtherArgs:
    other: int = 0


class Zoned(FilterPlugin[ZoneArgs], ScorePlugin[ZoneArgs]):
    NAME = "Zoned"

    def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
        return SUCCESS

    def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int:
        zone: str = self.args.zone  # a ZoneArgs to mypy: a misspelt field fails the static checks
        return 100 if node.node is not None and node.node.labels.get("zone") == zone else 0


def test_the_named_type_is_the_plugins_args() -> None:
    assert Zoned.Args is ZoneArgs
    assert Zoned().args == ZoneArgs()
    assert Zoned(ZoneArgs(zone="b")).args.zone == "b"
    assert Zoned.new({"zone": "c"}, name="ZonedC").args == ZoneArgs(zone="c")
    with pytest.raises(PluginArgsError) as exc:
        Zoned.new({"zone": ""})
    assert exc.value.field == "zone"
    with pytest.raises(TypeError, match="Zoned takes ZoneArgs, not OtherArgs"):
        Zoned(OtherArgs())  # type: ignore[arg-type]  # mypy says so too


def test_a_subclass_inherits_the_type_and_unnamed_plugins_keep_theirs() -> None:
    class Narrower(Zoned):
        NAME = "Narrower"

    class Plain(FilterPlugin):
        NAME = "Plain"

        def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
            return SUCCESS

    class Explicit(FilterPlugin):
        NAME = "Explicit"
        Args = OtherArgs

        def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
            return SUCCESS

    assert Narrower.Args is ZoneArgs and Narrower().args == ZoneArgs()
    assert Plain.Args is NoArgs and Plain().args == NoArgs()
    assert Explicit.Args is OtherArgs and Explicit.new({"other": 3}).args == OtherArgs(3)


def test_the_same_type_named_and_set_is_accepted() -> None:
    class Both(FilterPlugin[ZoneArgs]):
        NAME = "Both"
        Args = ZoneArgs

        def filter(self, state: CycleState, pod: Pod, node: NodeInfo) -> Status:
            return SUCCESS

    assert Both.Args is ZoneArgs


def test_two_types_are_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match="names two arguments types on its extension points: OtherArgs, ZoneArgs"):

        class Torn(FilterPlugin[ZoneArgs], ScorePlugin[OtherArgs]):
            NAME = "Torn"

    with pytest.raises(TypeError, match="sets Args = OtherArgs but its extension points name ZoneArgs"):

        class Contradicted(FilterPlugin[ZoneArgs]):
            NAME = "Contradicted"
            Args = OtherArgs


def test_a_policy_builds_it_with_its_typed_arguments() -> None:
    registry = Registry.in_tree().extended([(Zoned, "test")])
    spec = {"schedulerName": "s", "priorities": [{"name": "Zoned", "weight": 2, "argument": {"zone": "b"}}]}
    profile = validate_policy(spec, registry=registry)
    assert isinstance(profile, Profile), profile
    ((plugin, weight),) = profile.scorers
    assert isinstance(plugin, Zoned) and plugin.args == ZoneArgs(zone="b") and weight == 2
    bad = validate_policy({**spec, "priorities": [{"name": "Zoned", "argument": {"zone": ""}}]}, registry=registry)
    assert isinstance(bad, list) and [str(e) for e in bad] == ["spec.priorities[0].argument.zone: must not be empty"]
