"""A source topic is the mirror's only under the mirror's topic id (`kmirror.mirror.source_topic`)."""

from uuid import UUID

from kmirror.mirror.source_topic import NO_TOPIC_ID, SourceTopicStatus, check_source_topic, is_another_topic
from kmirror.protocol.mirror.find_coordinator import topic_id_string

MIRRORED = UUID(int=1)
OTHER = UUID(int=2)


def test_the_same_id_or_a_source_without_ids_is_the_mirrors_topic():
    assert check_source_topic(MIRRORED, MIRRORED).status is SourceTopicStatus.SAME
    assert check_source_topic(MIRRORED, NO_TOPIC_ID).same  # Metadata < v10: cannot tell
    assert check_source_topic(NO_TOPIC_ID, OTHER).same  # no id recorded: cannot tell
    assert check_source_topic(MIRRORED, MIRRORED).reason("t") == ""


def test_a_missing_name_is_deleted_and_another_id_is_recreated():
    deleted = check_source_topic(MIRRORED, None)
    assert deleted.status is SourceTopicStatus.DELETED and not deleted.same
    assert deleted.reason("t") == f"source topic t (topic id {topic_id_string(MIRRORED)}) was deleted"
    recreated = check_source_topic(MIRRORED, OTHER)
    assert recreated.status is SourceTopicStatus.RECREATED and recreated.source_topic_id == OTHER
    assert recreated.reason("t") == (f"source topic t was re-created: topic id {topic_id_string(OTHER)}, "
                                     f"the mirror copies {topic_id_string(MIRRORED)}")


def test_another_topic_needs_both_ids_known_and_different():
    assert is_another_topic(MIRRORED, OTHER)
    assert not is_another_topic(MIRRORED, MIRRORED)
    assert not is_another_topic(MIRRORED, None)
    assert not is_another_topic(MIRRORED, NO_TOPIC_ID)
    assert not is_another_topic(NO_TOPIC_ID, OTHER)
