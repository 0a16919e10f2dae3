"""The unit tests' builders are the plugin authors' (``kopf_scheduler.testing``): one set, exercised by every test.

Fluent builders for pods and nodes (after upstream ``testing/wrappers.go``) over the API-body builders of
``kopf_scheduler.cluster.bodies``: every pod in namespace "default" with a fresh uid and phase Pending,
every node a 4-cpu, 32Gi, Ready one, and ``obj()`` returning the body parsed by the same parser the
operator uses, so tests exercise the real parsing (``raw()`` or ``body`` give the body itself)::

    pod = make_pod("web").req(cpu="500m", memory="1Gi").node_selector(disk="ssd").obj()
    node = make_node("n1").capacity(cpu="4", memory="8Gi").label(zone="a").taint("k", "v").obj()
    info = node_info(node, pod_on_node)
"""

from __future__ import annotations

from kopf_scheduler.testing import (
    NodeBuilder,
    PodBuilder,
    make_coscheduling_group,
    make_node,
    make_pod,
    make_pod_group,
    node_info,
)

__all__ = [
    "NodeBuilder",
    "PodBuilder",
    "make_coscheduling_group",
    "make_node",
    "make_pod",
    "make_pod_group",
    "node_info",
]
