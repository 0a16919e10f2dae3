"""The public plugin API (``kopf_scheduler.framework``) is exactly these names, as httpx pins its exports.

A name added to or dropped from ``__all__`` is a change of the stable surface out-of-tree plugins
import: this test makes it a deliberate one (update the list here, and docs/plugins.md).
"""

from __future__ import annotations

import kopf_scheduler.framework as framework

PUBLIC = [
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "NO_ARGS",
    "SKIP",
    "SUCCESS",
    "ApiClient",
    "ApiResponse",
    "BindPlugin",
    "ClusterEvent",
    "ClusterEventWithHint",
    "Code",
    "CycleState",
    "Diagnosis",
    "EnqueueExtensions",
    "EnqueueHandle",
    "FilterPlugin",
    "Handle",
    "NoArgs",
    "Node",
    "NodeInfo",
    "NodeTable",
    "NormalizeScorePlugin",
    "PermitHandle",
    "PermitPlugin",
    "PermitResult",
    "Plugin",
    "PluginArgsError",
    "Pod",
    "PostFilterPlugin",
    "PostFilterResult",
    "PreBindPlugin",
    "PreEnqueuePlugin",
    "PreFilterExtensions",
    "PreFilterPlugin",
    "PreScorePlugin",
    "QueueSortPlugin",
    "QueuedPodInfo",
    "QueueingHint",
    "QueueingHintFn",
    "ReservePlugin",
    "Resources",
    "ScorePlugin",
    "SignFragment",
    "SignPlugin",
    "Snapshot",
    "StateKey",
    "Status",
    "Taint",
    "Toleration",
    "VectorFilter",
    "VectorScore",
    "WaitingPod",
    "binding_body",
    "binding_path",
    "default_normalize",
    "error",
    "parse_args",
    "parse_node",
    "parse_pod",
    "unresolvable",
    "unschedulable",
]


def test_all_is_exactly_the_public_names() -> None:
    assert framework.__all__ == PUBLIC


def test_every_public_name_is_defined_and_nothing_else_looks_public() -> None:
    for name in PUBLIC:
        assert getattr(framework, name, None) is not None, name
    extra = sorted(name for name in vars(framework) if not name.startswith("_") and name not in PUBLIC)
    assert extra == ["annotations"], "a public-looking name outside __all__: export it or make it private"
