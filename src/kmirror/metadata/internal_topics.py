"""Internal topics (`__consumer_offsets`, `__mirror_state`, ...) created on first use, as
Kafka's coordinators do: the same rule on the controller and on a forwarding broker."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from kmirror.metadata.controller import topics as topic_ops
from kmirror.metadata.controller.result import ApiError, MetadataOperationError
from kmirror.metadata.image import MetadataImage, TopicImage
from kmirror.protocol.errors import ErrorCode


class TopicCreator(Protocol):
    @property
    def image(self) -> MetadataImage: ...

    async def create_topics(
        self, topics: Sequence[topic_ops.CreatableTopic], *, validate_only: bool = False
    ) -> list[topic_ops.CreateTopicResult]: ...


async def ensure_internal_topic(
    metadata: TopicCreator, name: str, num_partitions: int, replication_factor: int,
    configs: Mapping[str, str] | None = None,
) -> TopicImage:
    """The internal topic, created if missing. Raises MetadataOperationError (e.g.
    INVALID_REPLICATION_FACTOR when fewer brokers are live: callers answer
    COORDINATOR_NOT_AVAILABLE, as Kafka does). A creation that raced another one and is not
    yet in this node's image is COORDINATOR_NOT_AVAILABLE too: the caller retries."""
    existing = metadata.image.topics.get(name)
    if existing is not None:
        return existing
    spec = topic_ops.CreatableTopic(name, num_partitions, replication_factor, configs=dict(configs or {}))
    results = await metadata.create_topics([spec])
    topic = metadata.image.topics.get(name)
    if topic is not None:
        return topic
    error = results[0].error if results else ApiError(ErrorCode.unknown_server_error)
    if error.code == ErrorCode.topic_already_exists:
        error = ApiError(ErrorCode.coordinator_not_available, "topic not yet visible")
    raise MetadataOperationError(error)
