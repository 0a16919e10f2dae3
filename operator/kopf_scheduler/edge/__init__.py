"""Everything that leaves the process: credentials (``credentials.py``), the asyncio HTTP client
(``client.py``) and informers (``informer.py``). Nothing here imports Kopf: the operator builds
Kopf's login from the same ``Credentials`` its own requests use.
"""
