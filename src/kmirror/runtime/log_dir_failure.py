"""A log directory that fails a read or a write halts the node, as Kafka's broker halts when its
log directories have failed (`LogDirFailureChannel`, then `Exit.halt(1)`).

What counts as a failed directory: an `OSError` whose errno says the storage itself refused
(`STORAGE_ERRNOS`: the disk is full or over quota, the file system went read-only after an
error, an I/O error, a file past the size limit). A missing file is not one: the log layer
expects those where a segment was deleted under a read.

Why halt rather than answer an error and go on: a write cut short leaves a torn tail in a
segment or in the metadata log, and a restart's recovery stops at the first invalid batch, so
whatever is appended after those bytes is cut at the next start. Halting leaves the tail for
recovery to cut, and a partition's leadership moves to an in-sync replica as after any broker
failure, so nothing acknowledged is lost (docs/design/storage.md). Kafka keeps serving the healthy directories of a node with several
(`log.dirs`, its controller tracking each replica's directory, KIP-858); kmirror's controller
does not track directories, so a node halts at its first failed one.
"""

from __future__ import annotations

import errno
import logging
import os
from collections.abc import Callable, Sequence
from typing import NoReturn

log = logging.getLogger(__name__)

STORAGE_ERRNOS = frozenset({errno.EIO, errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


def is_storage_failure(exc: OSError) -> bool:
    return exc.errno in STORAGE_ERRNOS


def hand_over(exc: OSError, path: str, on_failure: Callable[[str, OSError], NoReturn] | None) -> NoReturn:
    """`exc`, raised while accessing `path`: a storage failure goes to `on_failure` (the node's
    halt); anything else, or any error without a handler, is raised again."""
    if on_failure is None or not is_storage_failure(exc):
        raise exc
    on_failure(path, exc)


class LogDirFailureHandler:
    """Called with the path an operation failed on and its error: logs both, then halts."""

    def __init__(self, log_dirs: Sequence[str], halt: Callable[[int], object] = os._exit) -> None:
        self.log_dirs = [d.rstrip("/") for d in log_dirs]
        self._halt = halt

    def dir_of(self, path: str) -> str:
        """The log directory `path` lies in (the longest one that holds it), else `path`'s own."""
        holders = [d for d in self.log_dirs if path == d or path.startswith(d + "/")]
        return max(holders, key=len) if holders else os.path.dirname(path)

    def __call__(self, path: str, exc: OSError) -> NoReturn:
        log_dir = self.dir_of(path)
        log.error("Error while accessing %s in dir %s: %s", path, log_dir, exc)
        log.error("Stopping serving replicas in dir %s", log_dir)
        if len(self.log_dirs) > 1:
            log.critical("Shutdown broker because log dir %s has failed (a node does not serve with a "
                         "failed log dir; its partitions move to their in-sync replicas)", log_dir)
        else:
            log.critical("Shutdown broker because all log dirs in %s have failed", log_dir)
        for handler in logging.getLogger().handlers:
            try:
                handler.flush()
            except Exception:  # the log may be on the failed disk: halt all the same
                pass
        self._halt(1)
        raise SystemExit(1)  # reached only when `halt` returns (tests)
