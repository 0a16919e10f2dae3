"""The pure scheduling core: objects, cache, queue, plugins, policies and the algorithm.

Nothing in this package does I/O, reads a clock or draws randomness of its own:
time and random generators are arguments. ``tests/test_layering.py`` and the
import-linter contract in pyproject.toml keep it that way.
"""
