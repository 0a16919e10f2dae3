"""Out-of-tree plugins: the ``kopf_scheduler.plugins`` entry-point group, loaded into a ``Registry``.

A plugin package declares, in its pyproject.toml::

    [project.entry-points."kopf_scheduler.plugins"]
    CostAware = "cost_aware:CostAware"

and a SchedulingPolicy then names ``CostAware`` exactly like a built-in plugin. The entry point's
object must be a ``kopf_scheduler.framework.Plugin`` subclass with a ``NAME``; the entry point's
own name is only a label. A package that fails to import, or a plugin whose name clashes with a
built-in one, is not registered: the problem is kept in ``Registry.problems`` and named in the
rejection of any policy that uses it (and logged by the operator), so one broken package never
stops the scheduler.

Discovery reads installed distributions' metadata (I/O), which is why it lives here, at the edge,
and not in the pure core: the operator and ``simulate`` call ``installed_registry()`` and hand the
result to ``core.config.policy.validate_policy``.
"""

from __future__ import annotations

import importlib.metadata
from functools import cache
from typing import Any, Final

from ..core.config.registry import Registry

__all__ = ["GROUP", "installed_registry", "load_registry"]

GROUP: Final = "kopf_scheduler.plugins"


def load_registry(entry_points: Any = None) -> Registry:
    """The in-tree registry extended with the plugins of ``entry_points`` (default: the installed ones)."""
    found = entry_points if entry_points is not None else importlib.metadata.entry_points(group=GROUP)
    plugins: list[tuple[Any, str]] = []
    problems: dict[str, str] = {}
    for ep in found:
        origin = f"{ep.value} (entry point {ep.name!r}{_distribution(ep)})"
        try:
            obj = ep.load()
        except Exception as exc:  # a broken package must not stop the scheduler: report it
            problems[str(ep.name)] = f"{origin}: cannot be imported: {type(exc).__name__}: {exc}"
            continue
        plugins.append((obj, origin))
    return Registry.in_tree().extended(plugins, problems)


@cache
def installed_registry() -> Registry:
    """``load_registry()`` once per process (installing a plugin package needs a restart, as upstream's recompile)."""
    return load_registry()


def _distribution(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return ""
    return f" of {dist.metadata['Name']} {dist.version}"
