"""One module per scheduling plugin. The list of them, and the v1.9 names they answer to, lives in
``core/config/registry.py``."""
