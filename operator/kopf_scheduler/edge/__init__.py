"""Everything that leaves the process: credentials (``credentials.py``), the HTTP transport
(``transport.py``) and its two clients, for the API server (``client.py``: ``Api``) and for a
policy's extenders (``extenders.py``: ``HTTPExtender``); informers (``informer.py``), the
live-cluster snapshot (``snapshot.py``), the commands' blocking client (``blocking.py``), node
usage pollers for the load-aware plugins (``usage.py``), the scheduling trace of ``run --record``
(``recorder.py``: a writer thread and its files) and out-of-tree plugin discovery (``plugins.py``). Nothing
here imports Kopf: the operator builds Kopf's login from the same ``Credentials`` its own requests use.

One answer type, the core's ``ApiResponse`` (``core/framework/interface.py``, simulate's too), and one
status rule: ``ok`` is 2xx, ``gone`` 404, ``conflict`` 409, ``unauthorized`` 401; callers never compare codes.
Extender answers keep upstream's own rule (exactly 200, ``extenders.STATUS_OK``).

**Two HTTP stacks run in the operator, and why:**

1. *Our HTTP/1.1 keep-alive client* (``transport.Pool``): every request the operator makes itself,
   to the API server (binds, events, pod and policy statuses, evictions, the Lease, lists) and to
   extenders. Those are small, many and latency-bound: aiohttp's general-purpose request machinery
   cost twice the CPU of a whole bind exchange (``bench/bench_client.py``), and the blocking
   ``http.client`` the extenders used before is a third stack for the same job. Extender calls come
   from worker threads and run on the operator's event loop (``transport.LoopBridge``); measured
   against ``http.client``, ``simulate``'s path costs the same (``bench/bench_extenders.py``) and
   the operator's pays one thread hop more, about 15 us of CPU a call.
2. *aiohttp*: Kopf's own client (its watches and patches), which we cannot replace. What Kopf
   already brings we use where per-request cost does not matter: our informers' watches
   (long-lived streams, ``client.Api.watch``) and the health and metrics server
   (``telemetry/health.py``).

The official ``kubernetes`` client is not an HTTP stack of the operator: its kubeconfig loader reads
the credentials of an ``exec`` or ``auth-provider`` user only (and, for an ``auth-provider`` token,
talks to the identity provider when it refreshes one). The commands that are not the operator use
``Api`` too: ``explain`` directly, ``simulate --from-cluster`` (``snapshot.py``) and the kubectl plugin
through ``blocking.BlockingApi`` (``Api`` on a private loop). A kubeconfig's ``proxy-url`` is a CONNECT
tunnel (``transport.Pool``).
Why ours and not the official client or pykube-ng for them: bench/bench_sync_clients.py, README.
"""
