"""DefaultBinder: bind the pod with a POST of ``pods/{name}/binding``, the last Bind plugin of every profile.

Follows upstream ``pkg/scheduler/framework/plugins/defaultbinder/default_binder.go``: a ``Binding``
naming the pod (with its uid, so the API server refuses to bind a pod deleted and recreated under
the same name) and the node. It never answers SKIP: the binders before it (a policy's
``spec.plugins``) may hand the pod on, DefaultBinder binds it. A failed POST is an ERROR carrying the
API server's message; what the operator makes of a 404, a 409 or no answer at all is decided from
the answer itself (``kube/binding.py``).

The answer's body is not decoded (``decode=False``): a Status nobody reads, whose parsing cost more
than the rest of the exchange.
"""

from __future__ import annotations

from typing import Any

from ..framework import basics
from ..framework.basics import CycleState, Status
from ..framework.interface import ApiClient, BindPlugin
from ..model import paths
from ..model.objects import Pod

#: the Binding subresource of a pod, as the API server serves it


def binding_path(pod: Pod) -> str:
    return paths.pod(pod.namespace, pod.name, "binding")


def binding_body(pod: Pod, node_name: str, *, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    """A ``v1.Binding`` of `pod` to `node_name`; the API server copies its `annotations` onto the pod."""
    metadata: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": metadata,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
    }


class DefaultBinder(BindPlugin):
    NAME = "DefaultBinder"

    async def bind(self, state: CycleState, pod: Pod, node_name: str, client: ApiClient) -> Status:
        response = await client.request("POST", binding_path(pod), binding_body(pod, node_name), decode=False)
        return basics.SUCCESS if response.ok else basics.error(response.detail())
