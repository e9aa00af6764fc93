"""Mirror name rules (KIP-1279 CreateMirror and its discussion thread).

A mirror name "has the same validation rules of topic names" (Kafka `Topic.validate`: ASCII
alphanumerics, '.', '_', '-'; not empty, not "." or ".."), and must not end with one of the
status suffixes the topic config `mirror.name` uses (`.removed`, `.paused`), so that a
`mirror.name` value parses from the right without ambiguity.

Length: a topic name may have 249 characters. The stored `mirror.name` value of a removed
topic is `<mirror>.removed`; to keep every stored value itself a legal name, a mirror name
may have at most 249 - len(".removed") = 241 characters (docs/design/mirroring.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

MAX_TOPIC_NAME_LENGTH: Final = 249
REMOVED_SUFFIX: Final = ".removed"
PAUSED_SUFFIX: Final = ".paused"
STATUS_SUFFIXES: Final = (REMOVED_SUFFIX, PAUSED_SUFFIX)
MAX_MIRROR_NAME_LENGTH: Final = MAX_TOPIC_NAME_LENGTH - max(len(s) for s in STATUS_SUFFIXES)
_LEGAL: Final = re.compile(r"[a-zA-Z0-9._-]+")


@dataclass(frozen=True, slots=True)
class InvalidMirrorName:
    """Answered as INVALID_MIRROR_NAME at the edge."""

    message: str


def validate_mirror_name(name: str | None) -> InvalidMirrorName | None:
    """None when `name` is a legal mirror name, else why not."""
    if not name:
        return InvalidMirrorName("Mirror name is illegal, it can't be empty")
    if name in (".", ".."):
        return InvalidMirrorName("Mirror name cannot be \".\" or \"..\"")
    if len(name) > MAX_MIRROR_NAME_LENGTH:
        return InvalidMirrorName(
            f"Mirror name is illegal, it can't be longer than {MAX_MIRROR_NAME_LENGTH} characters, "
            f"mirror name: {name}"
        )
    if not _LEGAL.fullmatch(name):
        return InvalidMirrorName(
            f"Mirror name \"{name}\" is illegal, it contains a character other than ASCII "
            "alphanumerics, '.', '_' and '-'"
        )
    for suffix in STATUS_SUFFIXES:
        if name.endswith(suffix):
            return InvalidMirrorName(f"Mirror name \"{name}\" is illegal, it cannot end with \"{suffix}\"")
    return None
