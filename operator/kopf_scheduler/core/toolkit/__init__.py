"""What several plugins share, below them all (upstream's ``framework/preemption`` and ``plugins/helper``):
score shapes and resource weights (``scoring``), vectorised node affinity and taint matching (``node_matching``),
OpportunisticBatching's signatures (``batching``), gang bookkeeping (``gangs``), the preemption evaluator
(``preemption``) and its pod-group form (``pod_group_preemption``). Plugins import these, never each other."""
