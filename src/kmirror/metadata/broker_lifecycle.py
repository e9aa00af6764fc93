"""The broker's lifecycle with respect to the controller (Kafka `BrokerLifecycleManager`
states), as a transition table.

    STARTING --registered--> RECOVERY --unfenced--> RUNNING
    RECOVERY|RUNNING --fenced--> RECOVERY            (the controller fenced us: keep heartbeating)
    RECOVERY|RUNNING|STARTING --shutdown requested--> PENDING_CONTROLLED_SHUTDOWN
    PENDING_CONTROLLED_SHUTDOWN --should_shut_down--> SHUTTING_DOWN
    any --stale epoch--> STARTING                      (register again)

A heartbeat carries `want_shut_down` exactly in PENDING_CONTROLLED_SHUTDOWN.
"""

from __future__ import annotations

from enum import Enum


class BrokerState(Enum):
    STARTING = "STARTING"
    RECOVERY = "RECOVERY"
    RUNNING = "RUNNING"
    PENDING_CONTROLLED_SHUTDOWN = "PENDING_CONTROLLED_SHUTDOWN"
    SHUTTING_DOWN = "SHUTTING_DOWN"


S = BrokerState
VALID_FROM: dict[BrokerState, frozenset[BrokerState]] = {
    S.STARTING: frozenset({S.STARTING, S.RECOVERY, S.RUNNING}),
    S.RECOVERY: frozenset({S.STARTING, S.RECOVERY, S.RUNNING}),
    S.RUNNING: frozenset({S.RECOVERY, S.RUNNING}),
    S.PENDING_CONTROLLED_SHUTDOWN: frozenset({S.STARTING, S.RECOVERY, S.RUNNING, S.PENDING_CONTROLLED_SHUTDOWN}),
    S.SHUTTING_DOWN: frozenset({S.PENDING_CONTROLLED_SHUTDOWN, S.SHUTTING_DOWN}),
}


class IllegalTransition(RuntimeError):
    pass


class BrokerLifecycle:
    def __init__(self) -> None:
        self.state = BrokerState.STARTING
        self.broker_epoch = -1

    def _to(self, state: BrokerState) -> None:
        if self.state not in VALID_FROM[state]:
            raise IllegalTransition(f"{self.state.value} -> {state.value}")
        self.state = state

    @property
    def want_shut_down(self) -> bool:
        return self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN

    def on_registered(self, broker_epoch: int) -> None:
        self.broker_epoch = broker_epoch
        if self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            return
        self._to(BrokerState.RECOVERY)

    def on_heartbeat(self, is_fenced: bool, should_shut_down: bool) -> None:
        if self.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            if should_shut_down:
                self._to(BrokerState.SHUTTING_DOWN)
            return
        if self.state is BrokerState.SHUTTING_DOWN:
            return
        self._to(BrokerState.RECOVERY if is_fenced else BrokerState.RUNNING)

    def on_stale_epoch(self) -> None:
        if self.state in (BrokerState.PENDING_CONTROLLED_SHUTDOWN, BrokerState.SHUTTING_DOWN):
            return
        self._to(BrokerState.STARTING)

    def begin_controlled_shutdown(self) -> None:
        if self.state is not BrokerState.SHUTTING_DOWN:
            self._to(BrokerState.PENDING_CONTROLLED_SHUTDOWN)
