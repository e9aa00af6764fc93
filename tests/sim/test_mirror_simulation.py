"""Seeded simulation of two clusters through mirror, failover and failback
(`kmirror.testing.sim`, docs/design/mirroring.md "Simulation"). A failing seed prints itself
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
