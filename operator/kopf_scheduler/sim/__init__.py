"""Offline simulation: schedule pods against a cluster described in YAML, with the core only.

``kopf-scheduler simulate --cluster CLUSTER.yaml --pods PODS.yaml [--policy P.yaml]``
needs no API server; it also proves the core does no I/O of its own. ``kopf-scheduler replay DIR``
runs a trace recorded by ``run --record`` through the same ``Simulation`` with a candidate policy
(``replay.py``) and reports recorded against replayed (``replay_report.py``, ``png.py``).
"""
