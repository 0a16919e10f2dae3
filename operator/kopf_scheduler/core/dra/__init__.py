"""DynamicResources' pure parts (DRA with structured parameters, ``resource.k8s.io/v1``).

``objects`` and ``parsing`` (the four kinds and a pod's claim references, which ``Pod.resource_claims``
carries), ``expressions`` (CEL device selectors), ``allocator`` (upstream's incubating allocator),
``tracker`` (the ``DraTracker`` every cycle shares as ``ClusterObjects.dra``: informers' objects,
assumed writes, allocations in flight, the outbox of writes the executors send). Their watch events reach
the tracker and the queues through ``core/scheduling/dra_routing.py`` (it needs the cache and the queues,
which sit above this room: ``framework/snapshot.py`` imports the tracker). The plugin is
``core/plugins/dynamic_resources.py``; the operator's informers are in ``kube/handlers.py``, ``simulate``'s side in
``sim/dra.py``.
"""
