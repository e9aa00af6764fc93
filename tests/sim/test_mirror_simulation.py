"""Seeded simulation of two clusters through mirror, failover, failback and a deleted or
re-created source topic, with a transactional producer on the side that takes writes and its
transaction coordinator failing over, crashing in the middle of EndTxn included
(`kmirror.testing.sim`, docs/design/mirroring.md "Simulation", docs/design/transactions.md). A failing seed prints itself
and its trace; replay one seed with KMIRROR_SIM_SEED=<n>, run more seeds with
KMIRROR_SIM_SEEDS=<count>, and change the events per seed with KMIRROR_SIM_EVENTS=<n>."""

import os

import pytest

from kmirror.testing.sim.simulation import MirrorSimulation

EVENTS = int(os.environ.get("KMIRROR_SIM_EVENTS", "400"))
SEEDS = ([int(os.environ["KMIRROR_SIM_SEED"])] if "KMIRROR_SIM_SEED" in os.environ
         else list(range(int(os.environ.get("KMIRROR_SIM_SEEDS", "16")))))


@pytest.mark.parametrize("seed", SEEDS)
def test_mirror_failover_failback_keep_offsets_bytes_and_epochs(seed: int) -> None:
    coverage = MirrorSimulation(seed).run(EVENTS)
    assert coverage.failovers >= 1 and coverage.failbacks >= 1, coverage
    assert coverage.transactions_committed >= 1 and coverage.txn_coordinator_crashes_mid_end_txn >= 1, coverage
    assert coverage.txn_markers_resent_after_load >= 1, coverage


@pytest.mark.parametrize("seed", SEEDS)
def test_a_deleted_or_recreated_source_topic_never_removes_mirrored_records(seed: int) -> None:
    """The "source topic deleted / re-created" event early in the run: the destination keeps
    every mirrored record (only a truncation the KIP allows for the same topic id may remove
    one), never starts again on the new topic, stops, and after the operator's remove /
    delete / add mirrors the new topic byte for byte."""
    coverage = MirrorSimulation(seed, source_topic_deletion_after=25).run(EVENTS)
    assert coverage.source_topic_deletions == 1 and coverage.readded_after_deletion == 1, coverage
