"""What a failover loses: the lag of each mirror partition at the moment of failover.

Mirroring is asynchronous: records the source acknowledged after the mirror's last fetch
are not on the destination and are lost when the destination takes over. The mirror
knows the source's high watermark from its last Fetch answer (or, for a paused partition,
its last ListOffsets), so `lag_at_failover`, read on the destination just before
`kmirror mirrors --remove`, counts them: source high watermark minus the destination's log
end, per partition. The count is exact when the mirror saw the source's last high
watermark before the source went away; otherwise it is a lower bound (the source's own
log, when it comes back, gives the exact count: `kmirror verify` against it).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kmirror.client.admin import Admin


@dataclass(frozen=True, slots=True)
class FailoverPoint:
    mirror: str
    topic: str
    partition: int
    source_high_watermark: int
    """The source's high watermark as the mirror last saw it (-1: never seen)."""
    destination_log_end: int
    """The destination's log end: where the failover cuts the mirrored history."""
    state: str

    @property
    def lost_records(self) -> int:
        """Offsets the source had that the destination does not (0 when unknown)."""
        if self.source_high_watermark < 0 or self.destination_log_end < 0:
            return 0
        return max(0, self.source_high_watermark - self.destination_log_end)


async def lag_at_failover(destination_bootstrap: str, topics: Iterable[str]) -> list[FailoverPoint]:
    """Each mirror partition of `topics` on the destination, with what failing over now loses."""
    async with await Admin.connect(destination_bootstrap) as admin:
        described = await admin.describe_mirrors(topics=list(topics))
    return [FailoverPoint(d.mirror_name, d.topic, d.partition, d.source_offset, d.destination_offset, d.state)
            for d in described]


def lost_records(points: Iterable[FailoverPoint]) -> int:
    return sum(p.lost_records for p in points)
