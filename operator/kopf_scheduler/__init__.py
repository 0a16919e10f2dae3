"""kopf-scheduler: a Kubernetes scheduler written as a Kopf operator.

Layers (see README "Architecture"):
  core/       the pure scheduling algorithm, cache and queue; no I/O (rooms: model, dra, framework, toolkit,
              plugins, config, state, scheduling, each importing only those before it)
  sim/        offline simulation over YAML snapshots; uses core only
  cluster/    the local control plane (etcd + kube-apiserver) used by tests and the demo
  telemetry/  Prometheus metrics
  edge/       what leaves the process: credentials, the API client, informers
  kube/       the Kopf operator: handlers, scheduling loops and their effects, through edge/
  commands/   the kopf-scheduler command (run, simulate, explain, demo, cluster), on top of the rest
"""

__version__ = "0.1.0"
