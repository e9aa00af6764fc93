"""A background transactional producer for real-process failure tests: transactions of a few
records across every partition of a topic, committed or aborted at random, and the check that
a read_committed consumer sees exactly the committed ones, each whole and once."""

from __future__ import annotations

import random
import threading
import time

from confluent_kafka import KafkaError, KafkaException, Producer

from kmirror.testing.transactional_clients import read_all


class TransactionalWriter(threading.Thread):
    """Writes transactions of `size` records (`<tag>-<n>-<i>`) until `finish()`. Remembers the
    transactions it saw committed, saw aborted, and those whose outcome it could not learn (a
    fatal error, or an abort or commit that kept failing): those must be all in or all out."""

    def __init__(self, bootstrap: str, tag: str, topic: str, partitions: int, seed: int, size: int = 6) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.tag = tag
        self.topic = topic
        self.partitions = partitions
        self.size = size
        self.rng = random.Random(seed)
        self.committed: list[list[bytes]] = []
        self.aborted: list[list[bytes]] = []
        self.uncertain: list[list[bytes]] = []
        self.errors: list[str] = []
        self.stop = threading.Event()
        self.producer: Producer | None = None

    def new_producer(self) -> Producer:
        """A producer of the same transactional.id: its InitProducerId fences the previous one
        and ends that one's open transaction. Retried while the coordinator is unavailable
        (`finish()` gives up on a cluster that never comes back)."""
        while True:
            producer = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.tag, "linger.ms": 5,
                                 "transaction.timeout.ms": 30000, "message.timeout.ms": 30000})
            try:
                producer.init_transactions(30)
                return producer
            except KafkaException as exc:
                self.errors.append(f"init_transactions: {exc.args[0]}")
                time.sleep(0.5)

    def run(self) -> None:
        self.producer = self.new_producer()
        n = 0
        while not self.stop.is_set():
            values = [b"%s-%d-%d" % (self.tag.encode(), n, i) for i in range(self.size)]
            n += 1
            commit = self.rng.random() < 0.75
            outcome = self.transaction(values, commit)
            {"committed": self.committed, "aborted": self.aborted, "uncertain": self.uncertain}[outcome].append(values)
            time.sleep(0.02)

    def transaction(self, values: list[bytes], commit: bool) -> str:
        assert self.producer is not None
        try:
            self.producer.begin_transaction()
            for i, value in enumerate(values):
                self.producer.produce(self.topic, value=value, partition=i % self.partitions)
        except (KafkaException, BufferError) as exc:
            self.errors.append(f"produce: {exc}")
            return self.abort()
        return self.end(commit)

    def end(self, commit: bool) -> str:
        """Commit (or abort), retrying retriable errors; a transaction that needs an abort is
        aborted; anything else leaves the outcome unknown."""
        assert self.producer is not None
        for _ in range(10):
            try:
                if commit:
                    self.producer.commit_transaction(30)
                    return "committed"
                self.producer.abort_transaction(30)
                return "aborted"
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                self.errors.append(f"{'commit' if commit else 'abort'}: {err}")
                if err.txn_requires_abort():
                    return self.abort()
                if not err.retriable():
                    break
        self.producer = self.new_producer()
        return "uncertain"

    def abort(self) -> str:
        assert self.producer is not None
        try:
            self.producer.abort_transaction(30)
            return "aborted"
        except KafkaException as exc:
            self.errors.append(f"abort: {exc.args[0]}")
            self.producer = self.new_producer()
            return "uncertain"

    def finish(self) -> None:
        self.stop.set()
        self.join(300)
        assert not self.is_alive()


def assert_committed_exactly(bootstrap: str, writer: TransactionalWriter) -> None:
    """A read_committed consumer of `writer.topic` at `bootstrap` sees every committed
    transaction's records once, no aborted record, and each transaction of unknown outcome
    whole or not at all (`assert_whole_or_absent`)."""
    present = assert_whole_or_absent(bootstrap, writer)
    missing = [v for txn in writer.committed for v in txn if v not in present]
    assert not missing, f"{len(missing)} records of committed transactions missing, e.g. {missing[:3]}"


def assert_whole_or_absent(bootstrap: str, writer: TransactionalWriter, per_partition: bool = False) -> set[bytes]:
    """What a read_committed consumer of `writer.topic` at `bootstrap` sees (returned): each
    record once, no aborted record, and each transaction committed or of unknown outcome
    whole or not at all (a copy that stopped mid-stream, such as a mirror failed over).
    `per_partition`: each transaction's records in each partition whole or not at all, the
    guarantee of a mirror failed over without its source (KIP-1279 truncates each partition
    to its own LSO: a transaction whose markers reached some partitions' copies and not
    others' is cut between them). Records of other writers (another tag) are left out."""
    mine = writer.tag.encode() + b"-"
    seen = [v for v in read_all(bootstrap, writer.topic, writer.partitions, "read_committed") if v.startswith(mine)]
    assert len(seen) == len(set(seen)), "a record read twice"
    present = set(seen)
    leaked = [v for txn in writer.aborted for v in txn if v in present]
    assert not leaked, f"{len(leaked)} records of aborted transactions visible, e.g. {leaked[:3]}"
    parts = writer.partitions if per_partition else 1
    torn = [txn for txns in (writer.committed, writer.uncertain) for txn in txns
            if any(0 < sum(v in present for v in txn[p::parts]) < len(txn[p::parts]) for p in range(parts))]
    assert not torn, f"{len(torn)} transactions partly visible, e.g. {torn[:1]}"
    known = {v for txns in (writer.committed, writer.uncertain) for txn in txns for v in txn}
    assert present <= known, f"records no transaction wrote: {sorted(present - known)[:3]}"
    return present
