"""KIP-1279 `MirrorMetadataManager` sync error counters of one broker (cumulative counts,
read by the metrics layer as `MetadataRefreshError`, `TopicConfigMetadataSyncError`,
`ConsumerGroupOffsetSyncError`, `AclSyncError`).

Whoever runs a sync increments its counter when one attempt fails; a counter stays 0 while
its sync does not run on this broker.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class MirrorSyncErrors:
    metadata_refresh: int = 0  # source cluster metadata (leaders, offsets) could not be read
    topic_config: int = 0
    consumer_group_offset: int = 0
    acl: int = 0
