"""The local Kubernetes control plane used by the tests, the demo and the benchmarks.

`ControlPlane` runs etcd and kube-apiserver (and on request the upstream
kube-scheduler) built by tools/controlplane/build.sh, on loopback only.
`Kwok` plays the kubelets of its simulated nodes: KWOK built by tools/kwok/build.sh
(`ensure_kwok`), managing the nodes `kwok_node` annotates.
"""

from .build import BuildError, GoNotFoundError, ensure_binaries
from .controlplane import ControlPlane, ControlPlaneError, PortInUseError, free_port, write_kubeconfig
from .kwok import KWOK_NODE_ANNOTATION, Kwok, KwokInstall, ensure_kwok, kwok_node

__all__ = [
    "BuildError",
    "ControlPlane",
    "ControlPlaneError",
    "GoNotFoundError",
    "KWOK_NODE_ANNOTATION",
    "Kwok",
    "KwokInstall",
    "PortInUseError",
    "ensure_binaries",
    "ensure_kwok",
    "free_port",
    "kwok_node",
    "write_kubeconfig",
]
