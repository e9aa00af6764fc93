"""The one exception CLI commands raise for an expected failure: printed as `Error: ...`, exit 1."""


class CommandError(Exception):
    pass
