"""The node's loggers for BROKER_LOGGER configs (KIP-412, `kmirror.broker.loggers`): Python's
logging, whose levels are process-wide."""

from __future__ import annotations

import logging

from kmirror.broker.loggers import ROOT


class ProcessLoggerLevels:
    """`LoggerLevels` over this process's `logging` loggers (`root` is the root logger)."""

    def names(self) -> list[str]:
        return list(logging.Logger.manager.loggerDict)

    def effective_level(self, name: str) -> int:
        return self._logger(name).getEffectiveLevel()

    def set_level(self, name: str, level: int | None) -> None:
        self._logger(name).setLevel(logging.NOTSET if level is None else level)

    @staticmethod
    def _logger(name: str) -> logging.Logger:
        return logging.getLogger() if name == ROOT else logging.getLogger(name)
