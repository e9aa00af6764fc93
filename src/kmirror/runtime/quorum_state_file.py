"""Kafka's `quorum-state` file (`FileQuorumStateStore`): a voter's election state in the
metadata log's directory, JSON of `QuorumStateData` version 0, replaced atomically (written
aside, fsynced, renamed, the directory fsynced)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from kmirror.quorum.election_state import ElectionState

QUORUM_STATE = "quorum-state"
QUORUM_STATE_VERSIONS = (0, 1)
"""The `data_version`s of `quorum-state` read (1 adds `votedDirectoryId`); 0 is written."""


class CorruptQuorumStateError(RuntimeError):
    """The file cannot be read back (str() is one line)."""


def read_quorum_state(directory: Path) -> ElectionState | None:
    """The stored election state, None without a file; OSError as the disk raises it."""
    path = directory / QUORUM_STATE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    return _parse_quorum_state(data, path)


def write_quorum_state(directory: Path, state: ElectionState) -> None:
    path = directory / QUORUM_STATE
    partial = path.with_name(QUORUM_STATE + ".tmp")
    with open(partial, "wb") as f:
        f.write(_quorum_state_json(state))
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)
    fsync_dir(directory)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _quorum_state_json(state: ElectionState) -> bytes:
    """Kafka's `QuorumStateData` version 0 as `FileQuorumStateStore` writes it."""
    return json.dumps({
        "clusterId": "",
        "leaderId": state.leader_id,
        "leaderEpoch": state.epoch,
        "votedId": state.voted_id,
        "appliedOffset": 0,
        "currentVoters": [],
        "data_version": 0,
    }, separators=(",", ":")).encode()


def _parse_quorum_state(data: bytes, path: Path) -> ElectionState:
    try:
        fields = json.loads(data)
    except ValueError as exc:
        raise CorruptQuorumStateError(f"the quorum state {path} is not JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise CorruptQuorumStateError(f"the quorum state {path} is not a JSON object")
    if (version := _quorum_state_int(fields, "data_version", 0, path)) not in QUORUM_STATE_VERSIONS:
        raise CorruptQuorumStateError(f"the quorum state {path} is of data_version {version}, not "
                                      f"{' or '.join(map(str, QUORUM_STATE_VERSIONS))}")
    epoch = _quorum_state_int(fields, "leaderEpoch", 0, path)
    leader_id = _quorum_state_int(fields, "leaderId", -1, path)
    voted_id = _quorum_state_int(fields, "votedId", -1, path)
    return ElectionState(epoch, leader_id, voted_id)


def _quorum_state_int(fields: dict[str, object], key: str, minimum: int, path: Path) -> int:
    value = fields.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CorruptQuorumStateError(f"the quorum state {path} holds {key} {value!r}, not an integer >= {minimum}")
    return value
