"""Two binding-cycle plugins: the price of the chosen node, written where people read it.

- ``HourlyCostAnnotation`` (PreBind): before the bind, stamps the chosen node's hourly cost on the
  pod as the annotation ``example.com/hourly-cost`` (a merge patch of the pod), so a bill can be
  read off the pods. An unpriced node: nothing to stamp (SKIP). Its patch needs ``patch`` on
  ``pods`` in the scheduler's ClusterRole (deploy/rbac.yaml grants pods/binding and pods/status only).
- ``PricedBinder`` (Bind): binds pods headed for a priced node itself, with the price on the
  Binding as the annotation ``example.com/bound-at-hourly-cost`` (the API server copies a Binding's
  annotations onto the pod); for an unpriced node it answers SKIP and DefaultBinder binds the pod.
  It needs nothing the scheduler cannot do already (pods/binding, and reading nodes).

Both read the node through the ``ApiClient`` the binding cycle lends them (the operator's API
client; in ``kopf-scheduler simulate`` an in-memory API server holding the simulated cluster), and
never raise: a failed request is a ``Status`` naming what the API server said. Enable them in a
SchedulingPolicy's ``plugins`` list::

    plugins:
      - {name: HourlyCostAnnotation}
      - {name: PricedBinder, argument: {label: example.com/hourly-cost}}
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Final

from kopf_scheduler.framework import (
    SKIP,
    SUCCESS,
    ApiClient,
    BindPlugin,
    CycleState,
    PluginArgsError,
    Pod,
    PreBindPlugin,
    Status,
    binding_body,
    binding_path,
    error,
)

from . import DEFAULT_LABEL, valid_label_key

__all__ = ["BindingArgs", "HourlyCostAnnotation", "PricedBinder", "node_cost"]

#: where HourlyCostAnnotation writes the price
COST_ANNOTATION: Final = "example.com/hourly-cost"
#: where PricedBinder's Binding puts it
BOUND_AT_ANNOTATION: Final = "example.com/bound-at-hourly-cost"


@dataclass(frozen=True, slots=True)
class BindingArgs:
    """``argument`` of either plugin in a SchedulingPolicy."""

    #: the node label that holds the hourly cost
    label: str = DEFAULT_LABEL
    #: the pod annotation the price is written to ("" for the plugin's own default)
    annotation: str = ""

    def __post_init__(self) -> None:
        if not valid_label_key(self.label):
            raise PluginArgsError("label", f"{self.label!r} is not a valid label key")
        if self.annotation and not valid_label_key(self.annotation):
            raise PluginArgsError("annotation", f"{self.annotation!r} is not a valid annotation key")


async def node_cost(client: ApiClient, node_name: str, label: str) -> Decimal | None | Status:
    """The node's hourly cost from its label (None: unpriced), or the failure to read the node.

    A list with a field selector rather than a get: the scheduler's ClusterRole lists and watches
    nodes, it does not get them one by one."""
    response = await client.request("GET", f"/api/v1/nodes?fieldSelector=metadata.name%3D{node_name}")
    items = (response.body or {}).get("items") if response.ok else None
    if not items:
        why = response.detail() if not response.ok else "no such node"
        return error(f"cannot read node {node_name}: {why}")
    labels = (items[0].get("metadata") or {}).get("labels") or {}
    try:
        cost = Decimal(labels[label])
    except (KeyError, InvalidOperation):
        return None
    return cost if cost.is_finite() and cost >= 0 else None


class HourlyCostAnnotation(PreBindPlugin[BindingArgs]):
    NAME = "HourlyCostAnnotation"

    def __init__(self, args: BindingArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self.annotation: str = self.args.annotation or COST_ANNOTATION

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str, client: ApiClient) -> Status:
        cost = await node_cost(client, node_name, self.args.label)
        if isinstance(cost, Status):
            return cost
        if cost is None:
            return SKIP  # an unpriced node: nothing to stamp
        response = await client.request(
            "PATCH",
            f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}",
            {"metadata": {"annotations": {self.annotation: str(cost)}}},
            content_type="application/merge-patch+json",
        )
        return SUCCESS if response.ok else error(f"cannot annotate the pod: {response.detail()}")


class PricedBinder(BindPlugin[BindingArgs]):
    NAME = "PricedBinder"

    def __init__(self, args: BindingArgs | None = None, *, name: str | None = None) -> None:
        super().__init__(args, name=name)
        self.annotation: str = self.args.annotation or BOUND_AT_ANNOTATION

    async def bind(self, state: CycleState, pod: Pod, node_name: str, client: ApiClient) -> Status:
        cost = await node_cost(client, node_name, self.args.label)
        if isinstance(cost, Status):
            return cost
        if cost is None:
            return SKIP  # DefaultBinder binds pods headed for an unpriced node
        body = binding_body(pod, node_name, annotations={self.annotation: str(cost)})
        response = await client.request("POST", binding_path(pod), body)
        return SUCCESS if response.ok else error(response.detail())
