"""DynamicResources' pure parts (DRA with structured parameters, ``resource.k8s.io/v1``).

``objects`` and ``parsing`` (the four kinds and a pod's claim references, which ``Pod.resource_claims``
carries), ``expressions`` (CEL device selectors), ``allocator`` (upstream's incubating allocator),
``tracker`` (the ``DraTracker`` every cycle shares as ``ClusterObjects.dra``: informers' objects,
assumed writes, allocations in flight, the outbox of writes the executors send) and ``routing`` (watch
events into the tracker and the queues). The plugin is ``core/plugins/dynamic_resources.py``; the
operator's informers are in ``kube/handlers.py``, ``simulate``'s side in ``sim/dra.py``.
"""
