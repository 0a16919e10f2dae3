"""The pure scheduling core: objects, cache, queue, plugins, policies, the algorithm, and the
decisions the operator carries out (policy ownership, watch-event routing, one scheduling cycle).

Nothing in this package does I/O, reads a clock or draws randomness of its own:
time and random generators are arguments. ``tests/tools/test_layering.py`` and the
import-linter contract in pyproject.toml keep it that way.
"""
