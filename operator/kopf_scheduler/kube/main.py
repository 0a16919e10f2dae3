"""Entry for ``kopf run -m kopf_scheduler.kube.main -A --standalone``.

Importing this module registers every handler in Kopf's default registry: that is what
``kopf run -m`` expects of its module (the CLI, ``kopf-scheduler run``, builds its own registry
with ``handlers.register`` instead and imports nothing by side effect).
In the ``kopf run`` form there is no leader election (run one replica) and no health server.

Settings: see ``handlers.configure``.
"""

from __future__ import annotations

import kopf

from . import handlers

__all__: list[str] = []

handlers.register(kopf.get_default_registry())
