"""`TopicIds`: topics named by id in a request whose earlier versions named them (OffsetCommit
and OffsetFetch v10, Kafka 4.1). A handler resolves each id to its name through the metadata
image, works by name as before, and names the response's topics as the version does: by
name, or by the id the request gave. An id the cluster does not know keeps a placeholder
name, which no topic can have (topic names are made of `[a-zA-Z0-9._-]`), so its partitions'
errors are grouped and answered under that id.
"""

from __future__ import annotations

import uuid

from kmirror.metadata.image import MetadataImage

TOPIC_IDS_VERSION = 10


class TopicIds:
    def __init__(self, image: MetadataImage | None) -> None:
        self._image = image
        self._unknown: dict[str, uuid.UUID] = {}

    def name_of(self, topic_id: uuid.UUID | None) -> str | None:
        """The topic's name; None when the cluster has no topic of that id."""
        topic = self._image.topics_by_id.get(topic_id) if self._image is not None and topic_id else None
        return None if topic is None else topic.name

    def unknown(self, topic_id: uuid.UUID | None) -> str:
        """The placeholder name of an id that `name_of` could not resolve."""
        placeholder = f"<unknown topic id {topic_id}>"
        self._unknown[placeholder] = topic_id or uuid.UUID(int=0)
        return placeholder

    def id_of(self, name: str) -> uuid.UUID | None:
        """The id of a topic named in the response: the one a request gave for a placeholder,
        else the cluster's; None for a topic the cluster no longer has."""
        if name in self._unknown:
            return self._unknown[name]
        topic = self._image.topics.get(name) if self._image is not None else None
        return None if topic is None else topic.topic_id

    def naming(self, version: int, name: str) -> dict[str, object]:
        """The fields that name a response topic at `version`."""
        if version >= TOPIC_IDS_VERSION:
            return {"topic_id": self.id_of(name) or uuid.UUID(int=0)}
        return {"name": name}
