"""The public plugin API: what an out-of-tree plugin imports. See docs/plugins.md; its tests use the
test kit, ``kopf_scheduler.testing``.

Everything here is re-exported from ``kopf_scheduler.core`` (the pure scheduling core), so a
plugin sees exactly the types the built-in plugins use. Import from this module, not from
``kopf_scheduler.core.*``: these names are the stable surface (``__all__``, pinned by
tests/unit/test_framework_api.py). PreBind and Bind plugins talk to the API server through the
``ApiClient`` they are given; ``binding_path`` and ``binding_body`` build the pods/binding request
DefaultBinder sends. A ``QueueSortPlugin`` compares two ``QueuedPodInfo``s; a plugin that
subclasses ``EnqueueExtensions`` lists the ``ClusterEvent``s that may make a pod it rejected
schedulable, each with an optional hint answering a ``QueueingHint``.

    from kopf_scheduler.framework import NodeInfo, Pod, ScorePlugin, CycleState

    class CostAware(ScorePlugin[CostAwareArgs]):  # self.args: a CostAwareArgs, the plugin's Args
        NAME = "CostAware"

        def score(self, state: CycleState, pod: Pod, node: NodeInfo) -> int: ...
"""

from __future__ import annotations

from .core.framework.arguments import NO_ARGS, NoArgs, PluginArgsError, parse_args
from .core.framework.basics import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    SKIP,
    SUCCESS,
    Code,
    CycleState,
    QueuedPodInfo,
    StateKey,
    Status,
    error,
    unresolvable,
    unschedulable,
)
from .core.framework.diagnosis import Diagnosis
from .core.framework.interface import (
    ApiClient,
    ApiResponse,
    BindPlugin,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EnqueueHandle,
    FilterPlugin,
    Handle,
    NormalizeScorePlugin,
    PermitHandle,
    PermitPlugin,
    PermitResult,
    Plugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    QueueingHint,
    QueueingHintFn,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    SignFragment,
    SignPlugin,
    VectorFilter,
    VectorScore,
    default_normalize,
)
from .core.framework.nodeinfo import NodeInfo
from .core.framework.snapshot import NodeTable, Snapshot
from .core.framework.waiting import WaitingPod
from .core.model.objects import Node, Pod, Taint, Toleration
from .core.model.parsing import parse_node, parse_pod
from .core.model.resources import Resources
from .core.plugins.default_binder import binding_body, binding_path

__all__ = [
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
