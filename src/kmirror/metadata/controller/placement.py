"""Replica placement and assignment checks (Kafka's AdminUtils rack-unaware and rack-aware assignment)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.result import ApiError, Rng
from kmirror.metadata.image import MetadataImage


def live_broker_ids(image: MetadataImage) -> list[int]:
    return [b.broker_id for b in image.live_brokers()]


def usable_broker_ids(image: MetadataImage) -> list[int]:
    """The live brokers automatic placement may use: not those whose log directories are all
    cordoned (KIP-1066, Kafka's ClusterDescriber.usableBrokers)."""
    return [b.broker_id for b in image.live_brokers() if b.has_uncordoned_dirs]


def broker_racks(image: MetadataImage) -> dict[int, str | None]:
    return {b.broker_id: b.rack for b in image.live_brokers()}


def place_replicas(
    brokers: Sequence[int],
    first_partition: int,
    num_partitions: int,
    replication_factor: int,
    rng: Rng,
    racks: Mapping[int, str | None] | None = None,
) -> list[tuple[int, ...]] | ApiError:
    """Round-robin from a random start: partition p's first replica is broker (start + p) % n and
    its followers the next ones, shifted per wrap so follower sets differ (Kafka's
    AdminUtils.assignReplicasToBrokersRackUnaware)."""
    n = len(brokers)
    if n == 0:
        return ApiError(ErrorCode.invalid_replication_factor,
                        f"Unable to replicate the partition {replication_factor} time(s): All brokers are currently "
                        "fenced, or have all their log directories cordoned.")
    if replication_factor > n:
        return ApiError(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {replication_factor} time(s): The target replication factor of "
            f"{replication_factor} cannot be reached because only {n} broker(s) are registered or some brokers have "
            "all their log directories cordoned.",
        )
    if racks and any(racks.get(b) for b in brokers):
        return _place_rack_aware(brokers, first_partition, num_partitions, replication_factor, rng, racks)
    ordered = sorted(brokers)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out: list[tuple[int, ...]] = []
    for i in range(num_partitions):
        p = first_partition + i
        if p > 0 and p % n == 0:
            shift += 1
        first = (start + p) % n
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            offset = 1 + (shift + j) % (n - 1) if n > 1 else 0
            replicas.append(ordered[(first + offset) % n])
        out.append(tuple(replicas))
    return out


def rack_alternated(brokers: Sequence[int], racks: Mapping[int, str | None]) -> list[int]:
    """Brokers ordered so consecutive ones are in different racks: the first broker of each
    rack (racks sorted), then the second of each, ... (Kafka getRackAlternatedBrokerList)."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers):
        by_rack.setdefault(racks.get(b) or "", []).append(b)
    columns = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    for i in range(max(len(c) for c in columns)):
        out.extend(c[i] for c in columns if i < len(c))
    return out


def _place_rack_aware(
    brokers: Sequence[int],
    first_partition: int,
    num_partitions: int,
    replication_factor: int,
    rng: Rng,
    racks: Mapping[int, str | None],
) -> list[tuple[int, ...]]:
    """Kafka's assignReplicasToBrokersRackAware: leaders walk the rack-alternated list; each
    follower is the next broker (with the per-wrap shift) in a rack holding no replica yet,
    until every rack holds one, then any broker not yet chosen."""
    arranged = rack_alternated(brokers, racks)
    n = len(arranged)
    num_racks = len({racks.get(b) or "" for b in arranged})
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out: list[tuple[int, ...]] = []
    for i in range(num_partitions):
        p = first_partition + i
        if p > 0 and p % n == 0:
            shift += 1
        first = (start + p) % n
        leader = arranged[first]
        chosen = [leader]
        used_racks = {racks.get(leader) or ""}
        k = 0
        while len(chosen) < replication_factor:
            step = 1 + (shift + k) % (n - 1) if n > 1 else 0
            candidate = arranged[(first + step) % n]
            rack = racks.get(candidate) or ""
            k += 1
            if candidate in chosen:
                if k > 2 * n * n:
                    break
                continue
            if rack in used_racks and len(used_racks) < num_racks and k <= n * n:
                continue
            chosen.append(candidate)
            used_racks.add(rack)
        out.append(tuple(chosen))
    return out


def check_assignment(
    assignments: Mapping[int, Sequence[int]], first_partition: int, registered: Sequence[int]
) -> ApiError | None:
    """Manual assignments: consecutive partition ids from `first_partition`, non-empty, no
    duplicate replicas, equal replication factors, only registered brokers."""
    expected = list(range(first_partition, first_partition + len(assignments)))
    if sorted(assignments) != expected:
        return ApiError(
            ErrorCode.invalid_replica_assignment,
            f"Partitions should be consecutive and start at {first_partition}.",
        )
    sizes = {len(r) for r in assignments.values()}
    if 0 in sizes:
        return ApiError(ErrorCode.invalid_replica_assignment, "The manual partition assignment includes an empty replica list.")
    if len(sizes) > 1:
        return ApiError(
            ErrorCode.invalid_replica_assignment,
            "All partitions in the manual partition assignment must have the same number of replicas.",
        )
    known = set(registered)
    for _p, replicas in sorted(assignments.items()):
        if len(set(replicas)) != len(replicas):
            return ApiError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {_dup(replicas)} more than once.",
            )
        for b in replicas:
            if b not in known:
                return ApiError(
                    ErrorCode.invalid_replica_assignment,
                    f"The manual partition assignment includes broker {b}, but no such broker is registered.",
                )
    return None


def _dup(replicas: Sequence[int]) -> int:
    seen: set[int] = set()
    for b in replicas:
        if b in seen:
            return b
        seen.add(b)
    return -1


def new_topic_id(image: MetadataImage, rng: Rng, taken: set[uuid.UUID]) -> uuid.UUID:
    """A random v4 UUID unused by any topic (and not the zero/sentinel ids Kafka reserves)."""
    while True:
        tid = uuid.UUID(int=rng.getrandbits(128), version=4)
        if tid.int > 1 and tid not in image.topics_by_id and tid not in taken:
            return tid
