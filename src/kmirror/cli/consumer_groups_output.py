"""The tables and messages of `kmirror consumer-groups`, laid out as kafka-consumer-groups.sh
prints them (Kafka's `ConsumerGroupCommand`, `GroupOffsetsResetter.printOffsetsToReset`):
left-aligned columns at least 15 wide (PARTITION 10), one space apart, `-` for a missing
value, a blank line before each table. Pure functions from values to lines; trailing spaces
are dropped."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from kmirror.client.errors import KafkaError
from kmirror.client.groups import ConsumerGroupDescription, ListedGroup
from kmirror.types import TopicPartition

MISSING = "-"
REBALANCING_STATES = frozenset({"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"})


@dataclass(frozen=True, slots=True)
class PartitionAssignmentState:
    """One row of the offsets view (Kafka's `PartitionAssignmentState`)."""

    group: str
    topic: str
    partition: int
    offset: int | None
    log_end_offset: int | None
    consumer_id: str = MISSING
    host: str = MISSING
    client_id: str = MISSING
    leader_epoch: int | None = None

    @property
    def lag(self) -> int | None:
        if self.offset is None or self.offset == -1 or self.log_end_offset is None:
            return None
        return self.log_end_offset - self.offset


def _value(v: object) -> str:
    return MISSING if v is None else str(v)


def line(widths: Sequence[int], cells: Sequence[str]) -> str:
    """Java's `%-Ns` for each width, joined by one space; the last cell is not padded."""
    padded = [cell.ljust(w) for cell, w in zip(cells, widths, strict=False)] + list(cells[len(widths):])
    return " ".join(padded).rstrip()


def group_state_message(group: str, state: str, rows: int | None) -> tuple[str | None, str | None, bool]:
    """Kafka's `shouldPrintMemberState`: (error, notice, print the table). `rows` is None when
    there is nothing to show. The error (`Error: ...` line) is for a group that does not exist;
    the notice (stderr) for an empty or rebalancing group."""
    if rows is None:
        return f"The consumer group '{group}' does not exist.", None, False
    if state == "Dead":
        return f"Consumer group '{group}' does not exist.", None, False
    notice = None
    if state == "Empty":
        notice = f"Consumer group '{group}' has no active members."
    elif state in REBALANCING_STATES:
        notice = f"Warning: Consumer group '{group}' is rebalancing."
    return None, notice, rows > 0


def offsets_table(rows: Sequence[PartitionAssignmentState], *, verbose: bool = False) -> list[str]:
    """GROUP TOPIC PARTITION [LEADER-EPOCH] CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID."""
    g = max([15, *(len(r.group) for r in rows)])
    t = max([15, *(len(r.topic) for r in rows)])
    c = max([15, *(len(r.consumer_id) for r in rows)])
    h = max([15, *(len(r.host) for r in rows)])
    if verbose:
        widths = [g, t, 10, 15, 15, 15, 15, c, h]
        header = ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                  "CONSUMER-ID", "HOST", "CLIENT-ID"]
    else:
        widths = [g, t, 10, 15, 15, 15, c, h]
        header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                  "CLIENT-ID"]
    lines = ["", line(widths, header)]
    for r in rows:
        cells = [r.group, r.topic, str(r.partition)]
        if verbose:
            cells.append(_value(r.leader_epoch))
        cells += [_value(r.offset), _value(r.log_end_offset), _value(r.lag), r.consumer_id, r.host, r.client_id]
        lines.append(line(widths, cells))
    return lines


def assignment_string(partitions: Iterable[TopicPartition]) -> str:
    """`t1:0,1;t2:3`, topics and partitions sorted (Kafka's `getAssignmentString`); `-` if none."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return MISSING
    return ";".join(sorted(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in by_topic.items()))


def members_table(description: ConsumerGroupDescription, *, verbose: bool = False) -> list[str]:
    """GROUP CONSUMER-ID [GROUP-INSTANCE-ID] HOST CLIENT-ID #PARTITIONS, and with `verbose`
    CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH TARGET-ASSIGNMENT [UPGRADED] (UPGRADED only
    while a consumer group has members of both protocols)."""
    group, members = description.group_id, description.members
    with_instance = any(m.group_instance_id for m in members)
    upgraded = {m.upgraded for m in members}
    with_upgraded = True in upgraded and False in upgraded
    current = [assignment_string(m.assignment) for m in members]
    target = [assignment_string(m.target_assignment or ()) for m in members]
    widths = [max([15, len(group)]), max([15, *(len(m.consumer_id) for m in members)])]
    header = ["GROUP", "CONSUMER-ID"]
    if with_instance:
        widths.append(max([17, *(len(m.group_instance_id or "") for m in members)]))
        header.append("GROUP-INSTANCE-ID")
    widths += [max([15, *(len(m.host) for m in members)]), max([15, *(len(m.client_id) for m in members)]), 15]
    header += ["HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        widths += [15, max([20, *(len(a) for a in current)]), 15, max([20, *(len(a) for a in target)])]
        header += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        if with_upgraded:
            header.append("UPGRADED")
    lines = ["", line(widths, header)]
    for i, m in enumerate(members):
        cells = [group, m.consumer_id]
        if with_instance:
            cells.append(m.group_instance_id or "")
        cells += [m.host, m.client_id, str(len(m.assignment))]
        if verbose:
            cells += [_value(m.member_epoch), current[i], _value(description.target_assignment_epoch), target[i]]
            if with_upgraded:
                cells.append(_value(m.upgraded).lower())
        lines.append(line(widths, cells))
    return lines


def state_table(description: ConsumerGroupDescription, *, verbose: bool = False) -> list[str]:
    """GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE [GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH] #MEMBERS."""
    d, node = description, description.coordinator
    coordinator = f"{node.host}:{node.port}  ({node.node_id})"
    strategy = d.partition_assignor or MISSING
    widths = [max(15, len(d.group_id)), max(25, len(coordinator)), 20, 20]
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"]
    row = [d.group_id, coordinator, strategy, d.state]
    if verbose:
        widths += [15, 25]
        header += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row += [_value(d.group_epoch), _value(d.target_assignment_epoch)]
    header.append("#MEMBERS")
    row.append(str(len(d.members)))
    return ["", line(widths, header), line(widths, row)]


def list_table(groups: Sequence[ListedGroup], *, include_type: bool, include_state: bool) -> list[str]:
    """`--list --state` / `--type`: GROUP [TYPE] [STATE], the group column 10 wider than the
    longest id (at least 15)."""
    widths = [max([15, *(len(g.group_id) for g in groups)]) + 10]
    header = ["GROUP"]
    if include_type:
        widths.append(20)
        header.append("TYPE")
    if include_state:
        widths.append(20)
        header.append("STATE")
    lines = [line(widths, header)]
    for g in groups:
        cells = [g.group_id]
        if include_type:
            cells.append(g.group_type.capitalize() or "Unknown")
        if include_state:
            cells.append(g.state or "Unknown")
        lines.append(line(widths, cells))
    return lines


def reset_table(plan: Mapping[str, Mapping[TopicPartition, int]]) -> list[str]:
    """GROUP TOPIC PARTITION NEW-OFFSET, by group, topic and partition."""
    g = max([15, *(len(group) for group in plan)])
    t = max([15, *(len(tp.topic) for offsets in plan.values() for tp in offsets)])
    widths = [g, t, 10]
    lines = ["", line(widths, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"])]
    for group in sorted(plan):
        for tp, offset in sorted(plan[group].items()):
            lines.append(line(widths, [group, tp.topic, str(tp.partition), str(offset)]))
    return lines


# Kafka's `Errors` messages for the group errors the command reports in Kafka's words.
KAFKA_MESSAGES = {
    "INVALID_GROUP_ID": "The configured groupId is invalid.",
    "GROUP_ID_NOT_FOUND": "The group id does not exist.",
    "GROUP_AUTHORIZATION_FAILED": "Group authorization failed.",
    "NON_EMPTY_GROUP": "The group is not empty.",
    "GROUP_SUBSCRIBED_TO_TOPIC": "The consumer group is actively subscribed to the topic",
    "UNKNOWN_TOPIC_OR_PARTITION": "This server does not host this topic-partition.",
    "TOPIC_AUTHORIZATION_FAILED": "Topic authorization failed.",
}


def kafka_message(error: KafkaError) -> str:
    """`NAME: Kafka's message` (or the broker's), without the request context."""
    message = error.error_message or KAFKA_MESSAGES.get(error.error_name)
    return f"{error.error_name}: {message}" if message else error.error_name


def delete_offsets_table(results: Mapping[TopicPartition, str | None]) -> list[str]:
    """TOPIC PARTITION STATUS: `Successful` or `Error: ...`; partition -1 (a topic that could
    not be described) shows `-`."""
    t = max([15, *(len(tp.topic) for tp in results)])
    widths = [t, 10, 15]
    lines = ["", line(widths, ["TOPIC", "PARTITION", "STATUS"])]
    for tp in sorted(results):
        error = results[tp]
        lines.append(line(widths, [tp.topic, str(tp.partition) if tp.partition >= 0 else MISSING,
                                    "Successful" if error is None else f"Error: {error}"]))
    return lines
