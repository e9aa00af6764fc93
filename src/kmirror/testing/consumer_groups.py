"""A sans-IO driver for KIP-848 consumer groups: the core of `CoreHarness` plus simulated KIP-848
clients that apply every assignment they are given and report what they own, and simulated
classic consumers (`kmirror.testing.classic_clients`) for groups migrating between the two
protocols. After every step no partition of topic `t` may be owned by two clients."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kmirror.coordinator.consumer_group.heartbeat import heartbeat
from kmirror.coordinator.consumer_group.member import TopicPartitions
from kmirror.coordinator.consumer_group.messages import HeartbeatRequest, HeartbeatResult
from kmirror.coordinator.consumer_group.ports import TopicInfo
from kmirror.testing.classic_clients import ClassicMember
from kmirror.testing.groups import CoreHarness

T = uuid.UUID(int=7)


@dataclass
class Client:
    member_id: str
    epoch: int = 0
    owned: TopicPartitions = field(default_factory=dict)


class ConsumerGroups:
    def __init__(self, **config: Any) -> None:
        self.h = CoreHarness(**config)
        self.h.topics["t"] = TopicInfo(T, 6)
        self.clients: dict[str, Client] = {}
        self.classic: dict[str, ClassicMember] = {}

    @property
    def topics(self) -> dict[str, TopicInfo]:
        return self.h.topics

    @topics.setter
    def topics(self, value: dict[str, TopicInfo]) -> None:
        self.h.topics = value

    @property
    def core(self) -> Any:
        return self.h.core

    def send(self, req: HeartbeatRequest) -> HeartbeatResult:
        rid = self.h.next_request_id()
        self.h.run(heartbeat(self.h.core, rid, req, self.topics))
        result = self.h.responses[rid]
        assert isinstance(result, HeartbeatResult)
        return result

    def join(self, member_id: str, *, topics: tuple[str, ...] = ("t",), group: str = "g", **kw: Any) -> HeartbeatResult:
        client = self.clients.setdefault(member_id, Client(member_id))
        result = self.send(HeartbeatRequest(group, member_id, 0, rebalance_timeout_ms=kw.pop("rebalance_ms", 30_000),
                                            subscribed_topic_names=topics, owned={}, **kw))
        self._apply(client, result)
        return result

    def beat(self, member_id: str, *, group: str = "g") -> HeartbeatResult:
        client = self.clients[member_id]
        result = self.send(HeartbeatRequest(group, member_id, client.epoch, owned=dict(client.owned)))
        self._apply(client, result)
        return result

    def _apply(self, client: Client, result: HeartbeatResult) -> None:
        if result.error.value != 0:
            return
        client.epoch = result.member_epoch
        if result.assignment is not None:
            client.owned = dict(result.assignment)
        self.check_no_partition_owned_twice()

    def check_no_partition_owned_twice(self) -> None:
        seen: dict[tuple[uuid.UUID, int], str] = {}
        owned = [(c.member_id, c.owned) for c in self.clients.values()]
        owned += [(c.name, {T: frozenset(c.owned)}) for c in self.classic.values()]
        for name, tps in owned:
            for t, ps in tps.items():
                for p in ps:
                    assert (t, p) not in seen, f"{(t, p)} owned by {seen[(t, p)]} and {name}"
                    seen[(t, p)] = name

    def add_classic(self, name: str, *, cooperative: bool = True, instance_id: str | None = None,
                    **kw: Any) -> ClassicMember:
        """A classic consumer of topic `t` that starts joining."""
        member = ClassicMember(name, self.h, cooperative=cooperative, instance_id=instance_id, **kw)
        self.classic[name] = member
        member.join()
        return member

    def poll_classic(self, name: str) -> None:
        self.classic[name].poll(lambda topic: self.topics[topic].partitions)
        self.check_no_partition_owned_twice()

    def settle(self, rounds: int = 6) -> None:
        """Every client takes `rounds` turns: a heartbeat, or the next step of its rejoin."""
        for _ in range(rounds):
            for m in list(self.clients):
                self.beat(m)
            for name in list(self.classic):
                self.poll_classic(name)

    def owners(self) -> dict[int, str]:
        """Partition of `t` -> the client that owns it (consumer and classic clients)."""
        out = {p: c.member_id for c in self.clients.values() for p in c.owned.get(T, frozenset())}
        out.update({p: c.name for c in self.classic.values() for p in c.owned})
        return out

    def owned_partitions(self, member_id: str) -> set[int]:
        return set(self.clients[member_id].owned.get(T, frozenset()))
