"""What a plugin is written against: the shared values (``basics``: Status, Code, CycleState, QueuedPodInfo),
the extension points (``interface``), plugin arguments (``arguments``), why a pod did not fit (``diagnosis``),
timings (``instrumentation``, ``recording``) and what a cycle reads: ``nodeinfo``, the cluster ``snapshot``,
node ``usage``, the pods ``waiting`` at Permit. It imports only ``model/`` and ``dra/`` (the snapshot's tracker)."""
