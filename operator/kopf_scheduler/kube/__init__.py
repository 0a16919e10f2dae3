"""The Kopf operator: its handlers, the scheduling loops and their effects; it reaches Kubernetes through ``edge/``.

Kopf is imported here first, with the ``kubernetes`` client hidden from it: Kopf imports that client,
when installed, only to recognise its generated models in ``kopf.adopt`` and its kin, which the
scheduler never hands it, and those ~700 modules cost 0.3-0.4 s of every start (a third of the time
to the first bind at 200 nodes). Kopf then treats the client as absent; the client stays importable
by anyone else (plugins, the exec-plugin login). Under ``kopf run`` Kopf is already imported: nothing
changes.
"""

import sys


def _import_kopf_without_the_kubernetes_client() -> None:
    if "kopf" in sys.modules:
        return
    hidden = [name for name in ("kubernetes", "kubernetes_asyncio") if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # an ImportError to whoever imports it now
    try:
        import kopf  # noqa: F401
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


_import_kopf_without_the_kubernetes_client()
