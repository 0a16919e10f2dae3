"""The algorithm and the cycle: filter and score over a snapshot (``algorithm``), one scheduling and binding
cycle (``cycle``, ``binding``), watch events into the cache and the queues (``routing``, ``dra_routing``),
explanations of a decision (``explanation``, ``attempts``, ``trace``). The top room of the core."""
