"""The local Kubernetes control plane used by the tests, the demo and the benchmarks.

`ControlPlane` runs etcd and kube-apiserver (and on request the upstream
kube-scheduler) built by tools/controlplane/build.sh, on loopback only.
"""

from .build import BuildError, GoNotFoundError, ensure_binaries
from .controlplane import ControlPlane, ControlPlaneError, PortInUseError, free_port, write_kubeconfig

__all__ = [
    "BuildError",
    "ControlPlane",
    "ControlPlaneError",
    "GoNotFoundError",
    "PortInUseError",
    "ensure_binaries",
    "free_port",
    "write_kubeconfig",
]
