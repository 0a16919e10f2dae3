"""CSI migration of in-tree volumes: what ``k8s.io/csi-translation-lib`` v0.37 makes of them, for the scheduler.

Upstream's NodeVolumeLimits (``nodevolumelimits/utils.go`` ``isCSIMigrationOn``) and VolumeBinding
(``volumebinding/binder.go`` ``isCSIMigrationOnForPlugin``) treat five in-tree plugins as migrated: AWS EBS,
GCE PD, Azure Disk, Cinder and Portworx (Azure File and vSphere translate too, but both plugins keep them off).
Here: the CSI driver each migrates to, the volume handle a translated volume gets (``TranslateInTree*ToCSI``)
and the node affinity a translated PV gets (``translateTopologyFromInTreeToCSI``: the zone key becomes the
driver's topology key). A volume that does not translate raises ``Untranslatable`` with upstream's message.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from typing import Final

from .objects import NodeSelectorRequirement, NodeSelectorTerm, PersistentVolume, Volume

AWS_EBS: Final = "awsElasticBlockStore"
GCE_PD: Final = "gcePersistentDisk"
AZURE_DISK: Final = "azureDisk"
CINDER: Final = "cinder"
PORTWORX: Final = "portworxVolume"

#: in-tree volume kind -> the CSI driver it migrates to (the five migrations upstream keeps on)
MIGRATED_DRIVERS: Final[Mapping[str, str]] = {
    AWS_EBS: "ebs.csi.aws.com",
    GCE_PD: "pd.csi.storage.gke.io",
    AZURE_DISK: "disk.csi.azure.com",
    CINDER: "cinder.csi.openstack.org",
    PORTWORX: "pxd.portworx.com",
}
#: in-tree volume kind -> its in-tree plugin name (what a CSINode's migrated-plugins annotation lists)
IN_TREE_PLUGINS: Final[Mapping[str, str]] = {
    AWS_EBS: "kubernetes.io/aws-ebs",
    GCE_PD: "kubernetes.io/gce-pd",
    AZURE_DISK: "kubernetes.io/azure-disk",
    CINDER: "kubernetes.io/cinder",
    PORTWORX: "kubernetes.io/portworx-volume",
}
#: in-tree provisioner -> CSI driver (``GetCSINameFromInTreeName``), for a claim counted by its class
MIGRATED_PROVISIONERS: Final[Mapping[str, str]] = {IN_TREE_PLUGINS[k]: d for k, d in MIGRATED_DRIVERS.items()}
#: in-tree provisioners the translator knows but whose migration the scheduler keeps off
UNMIGRATED_PROVISIONERS: Final = frozenset({"kubernetes.io/azure-file", "kubernetes.io/vsphere-volume"})
#: in-tree volume kind -> the topology key its translated PV's zone affinity uses (Azure Disk, Portworx: none)
TOPOLOGY_KEYS: Final[Mapping[str, str]] = {
    AWS_EBS: "topology.ebs.csi.aws.com/zone",
    GCE_PD: "topology.gke.io/zone",
    CINDER: "topology.cinder.csi.openstack.org/zone",
}

ZONE: Final = "topology.kubernetes.io/zone"
REGION: Final = "topology.kubernetes.io/region"
ZONE_BETA: Final = "failure-domain.beta.kubernetes.io/zone"
REGION_BETA: Final = "failure-domain.beta.kubernetes.io/region"
MULTI_ZONE_DELIMITER: Final = "__"

_AWS_VOLUME_ID: Final = re.compile(r"^vol-[^/]*$")
_UNSPECIFIED: Final = "UNSPECIFIED"


class Untranslatable(ValueError):
    """An in-tree volume the translator refuses (upstream's error text)."""


def ebs_volume_id(kubernetes_id: str) -> str:
    """``KubernetesVolumeIDToEBSVolumeID``: a bare id, or the path of ``aws://<zone>/<id>``."""
    if not kubernetes_id.startswith("aws://"):
        return kubernetes_id
    aws_id = urllib.parse.urlsplit(kubernetes_id).path.strip("/")
    if not _AWS_VOLUME_ID.match(aws_id):
        raise Untranslatable(
            f"failed to translate Kubernetes ID to EBS Volume ID Invalid format for AWS volume ({kubernetes_id})"
        )
    return aws_id


def _gce_region(zones: list[str]) -> str:
    """``gceGetRegionFromZones``: the one region ``{locale}-{region}`` every zone belongs to."""
    regions = set()
    for zone in zones:
        parts = zone.split("-")
        if len(parts) != 3:
            raise Untranslatable(
                "failed to get region from zones: zone in unexpected format, "
                f"expected: {{locale}}-{{region}}-{{zone}}, got: {zone}"
            )
        regions.add("-".join(parts[:2]))
    if len(regions) != 1:
        shown = " ".join(f"{r}:{{}}" for r in sorted(regions))  # Go's %v of a sets.String
        raise Untranslatable(
            f"failed to get region from zones: multiple or no regions gotten from zones, got: map[{shown}]"
        )
    return regions.pop()


def _azure_handle(uri: str, disk_kind: str) -> str:
    if disk_kind.lower() != "managed":
        raise Untranslatable(f"kind({disk_kind}) is not supported in csi migration")
    return uri


def inline_handle(v: Volume) -> str:
    """The CSI volume handle ``TranslateInTreeInlineVolumeToCSI`` gives a migrated inline volume."""
    if v.kind == AWS_EBS:
        return ebs_volume_id(v.ident)
    if v.kind == GCE_PD:
        return f"projects/{_UNSPECIFIED}/zones/{_UNSPECIFIED}/disks/{v.ident}"
    if v.kind == AZURE_DISK:
        return _azure_handle(v.disk_uri, v.disk_kind)
    return v.ident  # Cinder, Portworx: the volume id


def pv_handle(pv: PersistentVolume) -> str:
    """The CSI volume handle ``TranslateInTreePVToCSI`` gives a migrated PV (GCE PD: by its zone label)."""
    if pv.kind == AWS_EBS:
        return ebs_volume_id(pv.ident)
    if pv.kind == GCE_PD:
        zones = (pv.labels.get(ZONE_BETA) or pv.labels.get(ZONE) or "").split(MULTI_ZONE_DELIMITER)
        if len(zones) == 1 and zones[0]:
            return f"projects/{_UNSPECIFIED}/zones/{zones[0]}/disks/{pv.ident}"
        if len(zones) > 1:
            return f"projects/{_UNSPECIFIED}/regions/{_gce_region(zones)}/disks/{pv.ident}"
        return f"projects/{_UNSPECIFIED}/zones/{_UNSPECIFIED}/disks/{pv.ident}"
    if pv.kind == AZURE_DISK:
        return _azure_handle(pv.disk_uri, pv.disk_kind)
    return pv.ident


def _has_key(terms: tuple[NodeSelectorTerm, ...] | None, key: str) -> bool:
    return any(r.key == key for t in terms or () for r in t.match_expressions)


def _rename(terms: tuple[NodeSelectorTerm, ...], old: str, new: str) -> tuple[NodeSelectorTerm, ...]:
    """``replaceTopology``: every requirement on ``old`` is on ``new`` instead."""

    def one(r: NodeSelectorRequirement) -> NodeSelectorRequirement:
        return NodeSelectorRequirement(new, r.operator, r.values) if r.key == old else r

    return tuple(NodeSelectorTerm(tuple(one(r) for r in t.match_expressions), t.match_fields) for t in terms)


def translated_node_affinity(pv: PersistentVolume) -> tuple[NodeSelectorTerm, ...] | None:
    """The required node affinity of ``TranslateInTreePVToCSI(pv)`` (``translateTopologyFromInTreeToCSI``).

    Raises ``Untranslatable`` where the translation fails (as ``pv_handle``)."""
    pv_handle(pv)  # the translation fails on a bad volume id / zone / kind before it touches the topology
    key = TOPOLOGY_KEYS.get(pv.kind)
    terms = pv.node_affinity
    if key is None:
        return terms
    # getTopologyLabel: the GA or beta keys, by the node affinity first, then by the labels
    labels = pv.labels
    beta = not _has_key(terms, ZONE) and (_has_key(terms, ZONE_BETA) or (ZONE not in labels and ZONE_BETA in labels))
    zone_key, region_key = (ZONE_BETA, REGION_BETA) if beta else (ZONE, REGION)
    if _has_key(terms, zone_key):
        terms = _rename(terms or (), zone_key, key)
    elif zone_key in pv.labels:
        zones = sorted({z.strip() for z in pv.labels[zone_key].split(MULTI_ZONE_DELIMITER) if z.strip()})
        if zones:  # addTopology: the requirement joins every term (or makes the only one)
            extra = NodeSelectorRequirement(key, "In", tuple(zones))
            terms = tuple(NodeSelectorTerm((*t.match_expressions, extra), t.match_fields) for t in terms or ()) or (
                NodeSelectorTerm((extra,)),
            )
    if region_key == REGION_BETA and _has_key(terms, REGION_BETA):
        terms = _rename(terms or (), REGION_BETA, REGION)
    return terms
