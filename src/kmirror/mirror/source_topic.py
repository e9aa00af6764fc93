"""Which source topic a mirror topic copies: identity by topic id, never by name.

A mirror topic has the source topic's id (AddTopicsToMirror creates it with that id), so the
mirror's recorded topic id is the destination topic's id. A source topic is the mirror's only
while the source lists the name with that id. Kafka gives a re-created topic a new id
precisely so that an old name is never taken for the old topic; the KIP's "Topic Deletion"
rule ("the mirror partitions on the destination cluster moves to STOPPED state. This prevents
accidental deletions to affect the destination cluster") therefore covers both:

- DELETED: the source does not list the name (Metadata without it, or with
  UNKNOWN_TOPIC_OR_PARTITION), or a request by topic id answers UNKNOWN_TOPIC_ID;
- RECREATED: the source lists the name with another topic id.

Either way nothing the source says about that name may change the destination: no append,
no truncation, no log start movement, no partition expansion, no config sync. A source that
lists the name without an id (Metadata before v10, Kafka < 2.8) cannot be told apart and
counts as SAME: ids are compared wherever the source has them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from uuid import UUID

from kmirror.protocol.mirror.find_coordinator import topic_id_string

NO_TOPIC_ID = UUID(int=0)
"""Kafka's `Uuid.ZERO_UUID`: the source listed the topic without a topic id."""


class SourceTopicStatus(Enum):
    SAME = "same"
    DELETED = "deleted"
    RECREATED = "recreated"


@dataclass(frozen=True, slots=True)
class SourceTopicCheck:
    status: SourceTopicStatus
    mirror_topic_id: UUID
    source_topic_id: UUID | None = None
    """The id the source lists the name with (RECREATED), else None."""

    @property
    def same(self) -> bool:
        return self.status is SourceTopicStatus.SAME

    def reason(self, topic: str) -> str:
        """Why the partitions of `topic` stopped (--describe, the WARN line)."""
        mirrored = topic_id_string(self.mirror_topic_id)
        if self.status is SourceTopicStatus.RECREATED:
            assert self.source_topic_id is not None
            return (f"source topic {topic} was re-created: topic id {topic_id_string(self.source_topic_id)}, "
                    f"the mirror copies {mirrored}")
        if self.status is SourceTopicStatus.DELETED:
            return f"source topic {topic} (topic id {mirrored}) was deleted"
        return ""


def check_source_topic(mirror_topic_id: UUID, listed_topic_id: UUID | None) -> SourceTopicCheck:
    """`listed_topic_id`: what the source's Metadata says for the name: None when it does
    not list it, `NO_TOPIC_ID` when it lists it without an id."""
    if listed_topic_id is None:
        return SourceTopicCheck(SourceTopicStatus.DELETED, mirror_topic_id)
    if listed_topic_id in (NO_TOPIC_ID, mirror_topic_id) or mirror_topic_id == NO_TOPIC_ID:
        return SourceTopicCheck(SourceTopicStatus.SAME, mirror_topic_id)
    return SourceTopicCheck(SourceTopicStatus.RECREATED, mirror_topic_id, listed_topic_id)


def is_another_topic(mirror_topic_id: UUID, answered_topic_id: UUID | None) -> bool:
    """An answer about a topic name comes from another topic than the mirror's: both ids
    known and different."""
    return (answered_topic_id is not None and answered_topic_id != NO_TOPIC_ID
            and mirror_topic_id != NO_TOPIC_ID and answered_topic_id != mirror_topic_id)
