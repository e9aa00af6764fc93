"""Publishing metadata images to the node's broker components without stalling the event loop.

Every image goes to one publish step (replica manager, replication, coordinators, mirror data
plane), in order. When an image adds more than `threshold` partitions hosted here that have
no log yet (a large CreateTopics or CreatePartitions), their logs are first created on a
worker thread (`kmirror.replication.log_preparation`), and the image is published once they
exist: the seconds of fsync'd file creation of a 10,000-partition topic then never run on the
event loop, and every connection keeps being served. Images arriving meanwhile are
coalesced (each image is complete; the newest is published next). Until publication the
broker answers for the new partitions as for any it does not host yet, as Kafka's brokers
apply metadata after the controller has answered.

Nothing else creates or deletes logs while a preparation runs: `apply_image` is the only
other writer and it only runs from `_publish`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from kmirror.replication.log_preparation import prepare_logs, unprepared_partitions

log = logging.getLogger(__name__)

LARGE_CREATION_PARTITIONS = 16


class MetadataPublisher:
    def __init__(self, replica_manager: Any, publish: Callable[[Any, Any], None],
                 threshold: int = LARGE_CREATION_PARTITIONS) -> None:
        self._replica_manager = replica_manager
        self._publish_step = publish
        self._threshold = threshold
        self._published: Any = None
        self._latest: Any = None
        self._task: asyncio.Task[None] | None = None

    def on_change(self, old_image: Any, new_image: Any) -> None:
        """The metadata listener."""
        del old_image
        self._latest = new_image
        if self._task is not None:
            return  # the running preparation publishes the newest image when done
        if len(self._unprepared(new_image)) <= self._threshold:
            self._publish(new_image)
            return
        self._task = asyncio.get_running_loop().create_task(self._prepare_and_publish())

    async def stop(self) -> None:
        """Wait for a running preparation (a worker thread cannot be interrupted)."""
        if self._task is not None:
            await asyncio.shield(self._task)

    def _unprepared(self, image: Any) -> list[Any]:
        rm = self._replica_manager
        return unprepared_partitions(image, rm.node_id, rm.log_manager)

    async def _prepare_and_publish(self) -> None:
        try:
            while True:
                image = self._latest
                missing = self._unprepared(image)
                if len(missing) <= self._threshold:
                    break
                log.info("creating %d partition logs off the event loop", len(missing))
                started = time.monotonic()
                try:
                    await asyncio.to_thread(prepare_logs, self._replica_manager, image, missing)
                except OSError as exc:  # publishing retries on the loop and reports the disk error
                    log.error("creating partition logs failed: %s", exc)
                    break
                except Exception:  # a bug must not leave the image unpublished
                    log.exception("creating partition logs failed")
                    break
                log.info("created %d partition logs in %.1f s", len(missing), time.monotonic() - started)
            started = time.monotonic()
            self._publish(self._latest)
            log.info("published metadata offset %s in %.3f s", getattr(self._latest, "offset", "?"),
                     time.monotonic() - started)
        finally:
            self._task = None

    def _publish(self, image: Any) -> None:
        old, self._published = self._published, image
        self._publish_step(old, image)
