"""A mirror reading its source through a secured listener (SSL, SASL), for the security tests:
the destination, the topic and its records are made here, and the mirror is shown to copy the
source's batches byte for byte."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from kmirror.testing.kafka_clients import produce_values, watermarks
from kmirror.testing.mirror_clusters import create_mirror, wait_until
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror
from kmirror.testing.segments import log_batches, partition_dir


def wait_byte_identical(dest: LocalCluster, source: LocalCluster, topic: str, partition: int = 0) -> None:
    """Until `dest` holds `source`'s batches of the partition, byte for byte, up to its log end
    (the source's replica on whichever of its brokers holds one)."""
    end = watermarks(source.bootstrap, topic, partition)[1]
    wait_until(lambda: watermarks(dest.bootstrap, topic, partition)[1] == end, "the mirror to catch up")
    held = next(n for n in range(1, source.nodes + 1) if partition_dir(source, topic, partition, n).is_dir())
    wait_until(lambda: log_batches(dest, topic, partition) == log_batches(source, topic, partition, held),
               "byte-identical batches")
    assert log_batches(dest, topic, partition)


@contextmanager
def mirrored_through(source: LocalCluster, listener: str, client: dict[str, str], directory: Path, topic: str,
                     codec: str, records: int = 40) -> Iterator[LocalCluster]:
    """A destination in `directory` mirroring `topic` of `source` through the bootstrap
    `listener` with `client`'s security configs; `topic` is created with `records` values
    compressed with `codec`. Yields the destination once it is byte-identical; stops it after."""
    dest = LocalCluster(directory / "dest", free_port_block())
    try:
        dest.up()
        kmirror("topics", "--bootstrap-server", source.bootstrap, "--create", "--topic", topic,
                "--partitions", "1", "--replication-factor", "1")
        produce_values({"bootstrap.servers": source.bootstrap, "compression.type": codec}, topic,
                       [f"{topic} {i}".encode() * 8 for i in range(records)])
        create_mirror(dest, listener, "secured", topic, directory / "mirror.properties", client)
        wait_byte_identical(dest, source, topic)
        yield dest
    finally:
        dest.down()
