"""The pure scheduling core: objects, cache, queue, plugins, policies, the algorithm, and the
decisions the operator carries out (policy ownership, watch-event routing, one scheduling cycle).

Its rooms, each importing only the rooms below it (bottom up): ``model/`` (the objects and reading them),
``dra/`` (DynamicResources' pure parts), ``framework/`` (what a plugin is written against; ``basics.py`` is the
leaf everything shares), ``toolkit/`` (what plugins share), ``plugins/``, then ``config/`` (policy to profile)
and ``state/`` (the queue and the cache) side by side, and ``scheduling/`` (the algorithm and the cycle) on top.

Nothing in this package does I/O, reads a clock or draws randomness of its own:
time and random generators are arguments. ``tests/tools/test_layering.py`` and the
import-linter contracts in pyproject.toml keep it that way (and the rooms layered;
``tests/tools/test_import_cycles.py``: no import cycle among modules either).
"""
