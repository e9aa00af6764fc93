"""The offsets `kmirror consumer-groups --reset-offsets` sets, as Kafka's `GroupOffsetsResetter`:
which partitions (`--topic t`, `--topic t:0,2`, `--all-topics`), checked to exist and have a
leader, and where (`--to-earliest`, `--to-latest`, `--to-offset N`, `--shift-by N`,
`--to-datetime`, `--by-duration`, `--to-current`). An offset asked for outside the log
(`--to-offset`, `--shift-by`) is moved to the log start or end with a warning. A timestamp with
no record at or after it falls back to the log end offset.

The parsers (`parse_topic_partitions`, `parse_duration`, `parse_datetime`) and `clamp` are
pure; the rest asks the cluster through the Admin client."""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from kmirror.cli.errors import CommandError
from kmirror.client.admin import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Admin
from kmirror.client.groups import OffsetAndMetadata
from kmirror.types import TopicPartition

SCENARIOS = ("to_offset", "shift_by", "to_datetime", "by_duration", "to_earliest", "to_latest", "to_current")
NO_EXECUTE_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. In a future major release, the default "
    "behavior of this command will be to prompt the user before executing the reset rather than doing a dry run. "
    "You should add the --dry-run option explicitly if you are scripting this command and want to keep the current "
    "default behavior without prompting."
)


def add_reset_arguments(p: argparse.ArgumentParser, offset: str) -> None:
    """`--dry-run` / `--execute` and the scenarios of `--reset-offsets`; `offset` names what is
    reset ("the committed offset")."""
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="only show the new offsets (the default)")
    mode.add_argument("--execute", action="store_true", help="set the new offsets")
    scenario = p.add_mutually_exclusive_group()
    scenario.add_argument("--to-offset", type=int, metavar="OFFSET")
    scenario.add_argument("--shift-by", type=int, metavar="N", help=f"move {offset} by N (may be < 0)")
    scenario.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss", help="the first offset at or after it")
    scenario.add_argument("--by-duration", metavar="PnDTnHnMnS", help="the first offset at or after now minus this")
    scenario.add_argument("--to-earliest", action="store_true")
    scenario.add_argument("--to-latest", action="store_true")
    scenario.add_argument("--to-current", action="store_true")


def parse_topic_partitions(arg: str) -> list[TopicPartition]:
    """`topic:0,1,2` -> its partitions (Kafka's `parseTopicsWithPartitions`)."""
    parts = arg.split(":")
    if len(parts) != 2 or not parts[0]:
        raise CommandError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    topic, partitions = parts
    out = []
    for p in partitions.split(","):
        if not re.fullmatch(r"[+-]?\d+", p.strip()):
            raise CommandError(f"Invalid partition '{p}' specified in topic arg '{arg}'")
        out.append(TopicPartition(topic, int(p)))
    return out


_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:[.,](\d{0,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_duration(text: str) -> datetime.timedelta:
    """An ISO-8601 duration as Java's `Duration.parse` reads it: `PnDTnHnMn.nS`, each part
    optional but at least one present, each signed, and the whole negated by a leading `-`
    (`P1DT2H`, `PT15M`, `PT0.5S`, `-PT6H`)."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or m.group(3) == "T" or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise CommandError(f"Text cannot be parsed to a Duration: '{text}'")
    sign, days, _, hours, minutes, seconds, fraction = m.groups()

    def num(value: str | None) -> int:
        return int(value) if value else 0

    secs = num(seconds)
    nanos = int((fraction or "").ljust(9, "0")) * (-1 if (seconds or "").startswith("-") else 1)
    total = datetime.timedelta(days=num(days), hours=num(hours), minutes=num(minutes), seconds=secs,
                               microseconds=nanos / 1000)
    return -total if sign == "-" else total


def parse_datetime(text: str) -> int:
    """`YYYY-MM-DDTHH:mm:SS[.sss][Z|+hh:mm]` -> epoch ms, as Kafka's `Utils.getDateTime`: a time
    with no zone is UTC."""
    date, sep, time_part = text.partition("T")
    if not sep:
        raise CommandError("Error parsing timestamp. It does not contain a 'T' according to ISO8601 format")
    if not any(c in time_part for c in "+-Z"):
        text += "Z"
    try:
        parsed = datetime.datetime.fromisoformat(text)
    except ValueError as exc:
        raise CommandError(f"Unparseable date: \"{text}\"") from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.UTC)
    return int(parsed.timestamp() * 1000)


def clamp(requested: Mapping[TopicPartition, int], log_start: Mapping[TopicPartition, int | None],
          log_end: Mapping[TopicPartition, int | None], warn: Callable[[str], None]) -> dict[TopicPartition, int]:
    """Kafka's `checkOffsetsRange`: an offset past the log end offset becomes it, one before the
    log start offset becomes that, each with a warning."""
    out: dict[TopicPartition, int] = {}
    for tp, offset in requested.items():
        end, start = log_end.get(tp), log_start.get(tp)
        if end is not None and offset > end:
            warn(f"New offset ({offset}) is higher than latest offset for topic partition {tp}. "
                 f"Value will be set to {end}.")
            offset = end
        elif start is not None and offset < start:
            warn(f"New offset ({offset}) is lower than earliest offset for topic partition {tp}. "
                 f"Value will be set to {start}.")
            offset = start
        out[tp] = offset
    return out


def _warn(message: str) -> None:
    print(f"WARN: {message}", file=sys.stderr)


async def log_offsets(admin: Admin, partitions: Iterable[TopicPartition], timestamp: int) -> dict[TopicPartition, int | None]:
    """ListOffsets at `timestamp` (or EARLIEST_TIMESTAMP / LATEST_TIMESTAMP) for the partitions
    that exist and have a leader; None for the others (Kafka's `Unknown`)."""
    wanted = sorted(set(partitions))
    if not wanted:
        return {}
    metadata = await admin.cluster.refresh(sorted({tp.topic for tp in wanted}))
    led = [tp for tp in wanted if metadata.leader_for(tp) is not None]
    listed = await admin.list_offsets(dict.fromkeys(led, timestamp)) if led else {}
    return {tp: listed[tp].offset if tp in listed else None for tp in wanted}


async def partitions_to_reset(admin: Admin, topics: Sequence[str], committed: Mapping[TopicPartition, object],
                              all_topics: bool) -> list[TopicPartition]:
    """`--all-topics`: every partition the group has an offset for; `--topic t`: all of t's
    partitions; `--topic t:0,1`: those."""
    if all_topics:
        return sorted(committed)
    out: list[TopicPartition] = []
    whole = [t for t in topics if ":" not in t]
    for t in topics:
        if ":" in t:
            out.extend(parse_topic_partitions(t))
    if whole:
        for name, description in (await admin.describe_topics(whole)).items():
            out.extend(TopicPartition(name, p.partition) for p in description.partitions)
    return sorted(set(out))


async def check_partitions_valid(admin: Admin, partitions: Sequence[TopicPartition]) -> None:
    """Kafka's `checkAllTopicPartitionsValid`: every partition exists and has a leader."""
    metadata = await admin.cluster.refresh(sorted({tp.topic for tp in partitions}))
    missing = [tp for tp in partitions
               if tp.topic not in metadata.topics or tp.partition not in metadata.topics[tp.topic].partitions]
    if missing:
        raise CommandError(f"The partitions \"{','.join(map(str, missing))}\" do not exist")
    leaderless = [tp for tp in partitions if metadata.leader_for(tp) is None]
    if leaderless:
        raise CommandError(f"The partitions \"{','.join(map(str, leaderless))}\" have no leader")


@dataclass(frozen=True, slots=True)
class ResetScenario:
    """One of Kafka's reset scenarios and its argument."""

    to_earliest: bool = False
    to_latest: bool = False
    to_current: bool = False
    to_offset: int | None = None
    shift_by: int | None = None
    to_datetime: str | None = None
    by_duration: str | None = None


async def new_offsets(admin: Admin, scenario: ResetScenario, partitions: Sequence[TopicPartition],
                      committed: Mapping[TopicPartition, OffsetAndMetadata], now_ms: int) -> dict[TopicPartition, int]:
    """The offset each partition is reset to (Kafka's `prepareOffsetsToReset`)."""
    if scenario.to_earliest or scenario.to_latest:
        found = await log_offsets(admin, partitions, EARLIEST_TIMESTAMP if scenario.to_earliest else LATEST_TIMESTAMP)
        which = "starting" if scenario.to_earliest else "ending"
        return {tp: _known(found[tp], f"Error getting {which} offset of topic partition: {tp}") for tp in partitions}
    if scenario.to_offset is not None or scenario.shift_by is not None:
        if scenario.to_offset is not None:
            requested = dict.fromkeys(partitions, scenario.to_offset)
        else:
            shift = scenario.shift_by or 0
            requested = {}
            for tp in partitions:
                if tp not in committed:
                    raise CommandError(f"Cannot shift offset for partition {tp} since there is no current committed offset")
                requested[tp] = committed[tp].offset + shift
        start = await log_offsets(admin, partitions, EARLIEST_TIMESTAMP)
        end = await log_offsets(admin, partitions, LATEST_TIMESTAMP)
        return clamp(requested, start, end, _warn)
    if scenario.to_datetime is not None or scenario.by_duration is not None:
        if scenario.to_datetime is not None:
            timestamp = parse_datetime(scenario.to_datetime)
        else:
            timestamp = now_ms - int(parse_duration(scenario.by_duration or "").total_seconds() * 1000)
        return await _offsets_for_timestamp(admin, partitions, timestamp)
    if scenario.to_current:
        end = await log_offsets(admin, [tp for tp in partitions if tp not in committed], LATEST_TIMESTAMP)
        return {tp: committed[tp].offset if tp in committed
                else _known(end[tp], f"Error getting ending offset of topic partition: {tp}") for tp in partitions}
    raise CommandError("Option --reset-offsets requires one of the following scenarios: --to-offset, --shift-by, "
                       "--to-datetime, --by-duration, --to-earliest, --to-latest, --to-current")


async def planned_offsets(admin: Admin, args: argparse.Namespace, scenario: ResetScenario,
                          committed: Mapping[TopicPartition, OffsetAndMetadata]) -> dict[TopicPartition, int]:
    """The offsets a reset moves a group to: the partitions `--topic`/`--all-topics` name,
    checked, and the scenario applied from the group's `committed` offsets now."""
    partitions = await partitions_to_reset(admin, args.topic or [], committed, args.all_topics)
    await check_partitions_valid(admin, partitions)
    return await new_offsets(admin, scenario, partitions, committed, int(time.time() * 1000))


async def _offsets_for_timestamp(admin: Admin, partitions: Sequence[TopicPartition],
                                 timestamp: int) -> dict[TopicPartition, int]:
    found = await log_offsets(admin, partitions, timestamp)
    empty = [tp for tp in partitions if found[tp] == -1]
    for tp in empty:
        print(f"Warn: Partition {tp.partition} from topic {tp.topic} is empty. Falling back to latest known offset.",
              file=sys.stderr)
    found.update(await log_offsets(admin, empty, LATEST_TIMESTAMP))
    return {tp: _known(found[tp], f"Error getting offset by timestamp of topic partition: {tp}") for tp in partitions}


def _known(offset: int | None, error: str) -> int:
    if offset is None or offset < 0:
        raise CommandError(error)
    return offset
