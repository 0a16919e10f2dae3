"""Read Kubernetes manifests (multi-document YAML, ``kind: List``) into core objects.

Everything the scheduler reads is accepted; other kinds are counted and
ignored, so a ``kubectl get -o yaml`` dump can be fed in as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..core import objects as o
from ..core.cache import SchedulerCache


class ManifestError(ValueError):
    """A document that cannot be read; the message names the file and document."""


def iter_documents(text: str, source: str) -> Iterator[Mapping[str, Any]]:
    """Every object in a YAML stream, with ``kind: List`` (and ``*List``) items flattened."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ManifestError(f"{source}: not valid YAML: {exc}") from None
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            raise ManifestError(f"{source}: document {i + 1} is not an object")
        kind = str(doc.get("kind") or "")
        if kind == "List" or (kind.endswith("List") and isinstance(doc.get("items"), list)):
            item_kind = kind[:-4] if kind != "List" else ""
            for item in doc.get("items") or ():
                if isinstance(item, Mapping):
                    if item_kind and not item.get("kind"):
                        item = {**item, "kind": item_kind}
                    yield item
        else:
            yield doc


def read_documents(path: str | Path) -> list[Mapping[str, Any]]:
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ManifestError(f"{p}: {exc.strerror}") from None
    return list(iter_documents(text, str(p)))


@dataclass(slots=True)
class LoadedCluster:
    cache: SchedulerCache
    ignored: dict[str, int] = field(default_factory=dict)  # kind -> count
    pending_in_cluster: list[o.Pod] = field(default_factory=list)  # unbound pods found in the cluster file


def load_cluster(docs: Iterable[Mapping[str, Any]], *, source: str = "cluster") -> LoadedCluster:
    """A cache filled with the nodes, bound pods and other objects of ``docs``."""
    cache = SchedulerCache()
    loaded = LoadedCluster(cache)
    objs = cache.objects
    pods: list[o.Pod] = []
    for doc in docs:
        kind = str(doc.get("kind") or "")
        try:
            if kind == "Node":
                cache.add_node(o.parse_node(doc))
            elif kind == "Pod":
                pod = o.parse_pod(doc)
                if pod.is_terminal:
                    continue
                (pods if pod.node_name else loaded.pending_in_cluster).append(pod)
            elif kind == "Service":
                s = o.parse_service(doc)
                objs.services[f"{s.namespace}/{s.name}"] = s
            elif kind in ("ReplicationController", "ReplicaSet", "StatefulSet"):
                c = o.parse_controller(doc)
                objs.controllers[f"{c.kind}/{c.namespace}/{c.name}"] = c
            elif kind == "PersistentVolume":
                pv = o.parse_persistent_volume(doc)
                objs.persistent_volumes[pv.name] = pv
            elif kind == "PersistentVolumeClaim":
                pvc = o.parse_persistent_volume_claim(doc)
                objs.persistent_volume_claims[pvc.key] = pvc
            elif kind == "StorageClass":
                sc = o.parse_storage_class(doc)
                objs.storage_classes[sc.name] = sc
            elif kind == "CSINode":
                cn = o.parse_csi_node(doc)
                objs.csi_nodes[cn.name] = cn
            elif kind == "PodDisruptionBudget":
                pdb = o.parse_pod_disruption_budget(doc)
                objs.pod_disruption_budgets[f"{pdb.namespace}/{pdb.name}"] = pdb
            elif kind == "Namespace":
                meta = doc.get("metadata") or {}
                objs.namespace_labels[str(meta.get("name") or "")] = dict(meta.get("labels") or {})
            else:
                loaded.ignored[kind or "<no kind>"] = loaded.ignored.get(kind or "<no kind>", 0) + 1
        except o.ObjectError as exc:
            raise ManifestError(f"{source}: {exc}") from None
    for pod in pods:
        cache.add_pod(pod)
    objs.generation += 1
    return loaded


def load_pods(docs: Iterable[Mapping[str, Any]], *, source: str = "pods") -> list[o.Pod]:
    """The pending pods of ``docs``, in file order (non-Pod documents are an error here)."""
    out = []
    for i, doc in enumerate(docs):
        if doc.get("kind") not in ("Pod", None):
            raise ManifestError(f"{source}: document {i + 1} is a {doc.get('kind')}, expected Pod")
        try:
            out.append(o.parse_pod(doc))
        except o.ObjectError as exc:
            raise ManifestError(f"{source}: {exc}") from None
    return out
