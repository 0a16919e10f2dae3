"""The scheduler's state between cycles: the scheduling queue (``queueing``), the cache of nodes and assumed
pods it snapshots (``cache``) and their debug dump (``dump``). Plugins never import it."""
