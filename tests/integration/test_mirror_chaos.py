"""Seeded random faults on a 3-broker source and a 3-broker destination while the source is
written to (idempotent acks=all, and transactions committed or aborted) and mirrored: kill -9
and SIGSTOP of brokers and of each cluster's controller, mirror pause/resume, and the link
between them cut or made a black hole; then every replica of both clusters must hold
the source's batches byte for byte, every acknowledged record must be at its offset once at
both ends, and a failover must leave every partition writable (`kmirror.testing.chaos`).
The disaster runs end by killing the whole source ("crash") or black-holing the link with the
source up ("partition") while it is written to, and failing over without it: the destination
must hold a byte-identical prefix of the source, each transaction whole or absent in each
partition; then the old source mirrors the destination back.

The "quorum" run gives each cluster three controllers (a Raft quorum of voters), so that its
controller faults kill or stop one voter, the active one or not; the "combined" run makes each
cluster's three brokers its voters (combined mode), and ends with the crash disaster.

`KMIRROR_CHAOS_SEED` replays a seed and `KMIRROR_CHAOS_SECONDS` sets how long faults are
injected; `python -m kmirror.testing.chaos --seconds 600` runs longer."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from kmirror.testing.chaos import clusters_in, run
from kmirror.testing.mirror_clusters import clusters_up

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize(("disaster", "controllers", "combined"),
                         [(None, 1, False), ("crash", 1, False), ("partition", 1, False), (None, 3, False),
                          ("crash", 1, True)],
                         ids=["healed", "crash", "partition", "quorum", "combined"])
def test_mirror_survives_random_faults_at_both_ends(tmp_path: Path, disaster: str | None, controllers: int,
                                                    combined: bool) -> None:
    seed = int(os.environ.get("KMIRROR_CHAOS_SEED", random.randrange(1 << 31)))
    seconds = float(os.environ.get("KMIRROR_CHAOS_SECONDS", "45"))
    print(f"KMIRROR_CHAOS_SEED={seed} replays this run")
    source, dest = clusters_in(tmp_path, controllers, combined)
    with clusters_up(source, dest):
        writer, txn_writer = run(source, dest, seed, seconds, tmp_path, disaster=disaster)
    assert len(writer.acked) > 500, f"seed {seed}: only {len(writer.acked)} records acknowledged"
    assert len(txn_writer.committed) > 20 and txn_writer.aborted, f"seed {seed}: too few transactions"
