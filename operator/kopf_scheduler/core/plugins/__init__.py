"""One module per scheduling plugin. The list of them, and their names, lives in ``core/registry.py``."""


class PluginArgsError(ValueError):
    """Invalid plugin arguments; ``field`` is the path inside the arguments (e.g. ``shape[1].score``)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message
