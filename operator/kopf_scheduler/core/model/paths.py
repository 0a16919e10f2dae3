"""API server paths, built in one place: ``/api/v1/...`` for the core group, ``/apis/<group>/<version>/...``
for the others (upstream ``k8s.io/client-go/rest``'s ``Request.URL``: prefix, namespace, resource, name,
subresource). Pure string building; queries are the caller's.

It lives in the core's bottom room so that everything can use it: the plugins' own writes (DefaultBinder's
pods/binding, DynamicResources' claims and pod status), the operator (``kube/``), the edge's lists,
telemetry's reviews, the commands and the local control plane. ``tests/unit/test_paths.py`` checks that no
other module of the package writes an API path by hand.
"""

from __future__ import annotations

__all__ = ["collection", "item", "pod"]


def _prefix(api_version: str) -> str:
    """``v1`` is the core group, served under ``/api``; every other group under ``/apis``."""
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


def collection(api_version: str, plural: str, *, namespace: str | None = None) -> str:
    """The objects of a kind (`plural`), across namespaces or in `namespace`:
    ``collection("apps/v1", "replicasets")`` is ``/apis/apps/v1/replicasets``."""
    scope = "" if namespace is None else f"/namespaces/{namespace}"
    return f"{_prefix(api_version)}{scope}/{plural}"


def item(api_version: str, plural: str, name: str, *, namespace: str | None = None, subresource: str = "") -> str:
    """One object, or its `subresource` (``status``, ``binding``...)."""
    path = f"{collection(api_version, plural, namespace=namespace)}/{name}"
    return f"{path}/{subresource}" if subresource else path


def pod(namespace: str, name: str, subresource: str = "") -> str:
    """A pod, or its `subresource`: ``pod("default", "web", "status")``."""
    return item("v1", "pods", name, namespace=namespace, subresource=subresource)
