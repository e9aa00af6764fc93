"""The source topic deleted, half the time re-created at once with another topic id (KIP-1279
"Topic Deletion"): the events of the SOURCE_DELETED phase and what the destination must keep."""

from __future__ import annotations

from uuid import UUID

from kmirror.testing.sim import invariants as inv
from kmirror.testing.sim.base import GONE_STATES, MIRRORING, SOURCE_DELETED
from kmirror.testing.sim.cluster import MIRROR, PARTITIONS, TOPIC
from kmirror.testing.sim.txn_events import TransactionEvents
from kmirror.types import TopicPartition


class SourceTopicDeletion(TransactionEvents):
    def _deletion_allowed(self) -> bool:
        """Once per run, while the destination holds mirrored records on every partition."""
        d = self.dst
        if self.coverage.source_topic_deletions or not d.alive or min(d.log_end_offsets()) <= 0:
            return False
        if self.deletion_after is None:
            return self.coverage.failbacks >= 1
        return len(self.trace) >= self.deletion_after

    def delete_source_topic(self) -> str:
        """The source's `t` is deleted, half the time re-created at once with another topic id
        (an explicit CreateTopics or a producer's auto-creation). What the destination holds
        now is flushed (a crash losing unflushed bytes is the disk's doing, not the mirror's)
        and must stay: the destination never removes it on the word of another topic."""
        s, d = self.src, self.dst
        for c in (s, d):
            if not c.alive:
                self.restart(c)
        self.check()  # what the restarts did, before the deletion
        d.broker.flush()
        self.deleted = {}
        for p in range(PARTITIONS):
            tp = TopicPartition(TOPIC, p)
            self.deleted[p] = (inv.stored_batches(d.rm, tp), {(b.base_offset, b.raw) for b in inv.stored_batches(s.rm, tp)})
            self.acked[p] = {}  # the source's records are deleted with the topic
            self.primary[p] = s
        self.deleted_topic_id = d.topic_id
        s.delete_topic()
        line = f"delete {TOPIC} at {s.name}"
        self.coverage.source_topic_deletions += 1
        if self.rng.random() < 0.5:
            self._recreate_source_topic()
            line += f", re-created with topic id {s.topic_id}"
        self.phase, self.phase_events = SOURCE_DELETED, 0
        return line

    def _recreate_source_topic(self) -> None:
        s = self.src
        s.create_topic(UUID(int=self.rng.getrandbits(128)))
        for p in range(PARTITIONS):
            self.max_epochs[(s.name, p)] = 0  # a new topic starts at leader epoch 0
        self.coverage.source_topic_recreations += 1

    def readd_after_deletion(self) -> str:
        """The operator's path to mirror the new source topic: wait until every partition
        stopped (it must, with the faults healed), remove `t` from the mirror, delete it at
        the destination, add it again: a new topic with the source's id, copied from 0."""
        self.heal()
        s, d = self.src, self.dst
        for _ in range(12):
            if all(d.state(p) in GONE_STATES for p in range(PARTITIONS)):
                break
            self.run_manager(d)
            self.clock.advance(1100)
        else:
            self.violations.append(f"{d.name} did not stop after its source topic was deleted: {self.describe(d)}")
            return "re-add: partitions did not stop"
        # the stopped destination took its own transactions: they end before it mirrors again
        # (no marker of its own may land on a mirror partition afterwards)
        self.finish_transactions(d)
        d.broker.flush()
        if not s.topic_present:
            self._recreate_source_topic()
        if d.mirror_name is not None:
            d.mirror_name = MIRROR + ".removed"
            d.publish()
            self.run_manager(d)
        d.delete_topic()
        d.mirror_name = MIRROR
        d.create_topic(s.topic_id)
        self.max_epochs.update({(d.name, p): 0 for p in range(PARTITIONS)})
        self.preexisting = {p: set() for p in range(PARTITIONS)}
        self.deleted = {}
        self.phase, self.phase_events = MIRRORING, 0
        self.coverage.readded_after_deletion += 1
        return f"re-add {TOPIC} to {MIRROR} on {d.name} (topic id {s.topic_id}); " + self.run_manager(d)

    def _step_source_deleted(self) -> str:
        d = self.dst
        if self.phase_events > 25 and self.rng.random() < 0.1:
            return self.readd_after_deletion()
        r = self.rng.random()
        if r < 0.25:
            return self.produce()
        if r < 0.45:
            return self.fetch(d)
        if r < 0.56:
            return self.retry_pending(d)
        if r < 0.62:
            return self.run_manager(d)
        if r < 0.70:
            ms = self.rng.choice([100, 1500, 3000])
            self.clock.advance(ms)
            return f"tick {ms}"
        if r < 0.78:
            return self.network_fault()
        if r < 0.83:
            c, p = self.rng.choice(self.clusters()), self.rng.randrange(PARTITIONS)
            c.leader_change(p)
            return f"leader change {c.name} p{p} -> epoch {c.leader_epochs[p]}"
        if r < 0.88:
            return self.crash(d) if d.alive else self.restart(d)
        if r < 0.92 and not self.src.topic_present:
            self._recreate_source_topic()
            return f"re-create {TOPIC} at {self.src.name} with topic id {self.src.topic_id}"
        if r < 0.96:
            d.store.unavailable = not d.store.unavailable
            return f"coordinator of {d.name} {'unavailable' if d.store.unavailable else 'back'}"
        return self.produce()

    def _check_source_deleted(self, p: int) -> None:
        """Mirrored records are never removed from the destination on the word of another
        topic: the log held at the deletion stays, byte for byte, followed only by late
        answers about the deleted topic (same topic id), then at most the MIRROR_PID_RESET of
        the stop and the destination's own writes after it. No partition starts again
        (PREPARING truncates on the source's word; a resume while the source is unreachable
        may still reach MIRRORING, which copies nothing of another topic)."""
        d = self.dst
        if not d.alive or p not in self.deleted:
            return
        kept, old_source = self.deleted[p]
        now = inv.stored_batches(d.rm, TopicPartition(TOPIC, p))
        name = f"{d.name} p{p}"
        if now[:len(kept)] != kept:
            self.violations.append(f"{name}: mirrored records removed after the source topic was deleted "
                                   f"(held {len(kept)} batches up to {kept[-1].last_offset if kept else -1}, "
                                   f"now {len(now)} up to {now[-1].last_offset if now else -1})")
            return
        for b in now[len(kept):]:
            if b.is_mirror_pid_reset:
                break
            if (b.base_offset, b.raw) not in old_source:
                self.violations.append(f"{name}: batch at {b.base_offset} appended after the source topic was "
                                       f"deleted is not the deleted topic's")
                break

