"""Seeded simulation of two clusters through mirror, failover and failback
(`kmirror.testing.sim`, docs/design/mirroring.md "Simulation"). A failing seed prints itself
and its trace; replay one seed with KMIRROR_SIM_SEED=<n>, run more seeds with
KMIRROR_SIM_SEEDS=<count>, and change the events per seed with KMIRROR_SIM_EVENTS=<n>."""

import os

import pytest

from kmirror.testing.sim.simulation import MirrorSimulation, SimulationFailure

EVENTS = int(os.environ.get("KMIRROR_SIM_EVENTS", "400"))
SEEDS = ([int(os.environ["KMIRROR_SIM_SEED"])] if "KMIRROR_SIM_SEED" in os.environ
         else list(range(int(os.environ.get("KMIRROR_SIM_SEEDS", "16")))))

# Open bugs the simulation found (docs/design/mirroring.md "Simulation"): a seed whose FIRST
# violation is one of these is reported as xfail with its trace; any other violation fails.
KNOWN_ISSUES = {
    "missing after failover": "a failover (or pause) after a failback's LME truncation but before the "
                              "fetch engine resolved the divergence inside the LME epoch keeps the stale tail",
    "follows the stale tail": "a stale tail in an epoch the source also wrote is not detected by the "
                              "epoch-based divergence check; the mirror appends after it",
    "the epoch cache says": "not yet diagnosed: after crashes and leader changes around a failover, a "
                            "destination's epoch cache misses the entry of mirrored batches (seed 10)",
}


@pytest.mark.parametrize("seed", SEEDS)
def test_mirror_failover_failback_keep_offsets_bytes_and_epochs(seed: int) -> None:
    try:
        coverage = MirrorSimulation(seed).run(EVENTS)
    except SimulationFailure as failure:
        for signature, why in KNOWN_ISSUES.items():
            if signature in failure.violations[0]:
                pytest.xfail(f"known issue: {why}\n{failure}")
        raise
    assert coverage.failovers >= 1 and coverage.failbacks >= 1, coverage
