"""server.properties and topic config definitions and validation (sans-IO except ServerConfig.load)."""

from kmirror.config.definitions import ConfigError
from kmirror.config.server import Listener, ServerConfig

__all__ = ["ConfigError", "Listener", "ServerConfig"]
