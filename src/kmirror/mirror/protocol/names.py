"""Mirror name rules (KIP-1279 CreateMirror, "Command-Line" and thread AS3).

A mirror name follows Kafka's topic name rules (non-empty, at most 249 characters of
`[a-zA-Z0-9._-]`, neither "." nor "..") and must not end with ".removed" or ".paused": those
suffixes on the topic config `mirror.name` mark removed and paused membership, so a name
ending with one would be read back as another mirror's state. Breaking a rule is
INVALID_MIRROR_NAME.
"""

import re
from typing import Final

MAX_NAME_LENGTH: Final = 249
REMOVED_SUFFIX: Final = ".removed"
PAUSED_SUFFIX: Final = ".paused"
FORBIDDEN_SUFFIXES: Final = (REMOVED_SUFFIX, PAUSED_SUFFIX)
_LEGAL: Final = re.compile(r"[a-zA-Z0-9._-]+")


def mirror_name_error(name: str | None) -> str | None:
    """Why `name` is not a legal mirror name, or None when it is."""
    if not name:
        return "Mirror name is empty"
    if name in (".", ".."):
        return f"Mirror name cannot be '{name}'"
    if len(name) > MAX_NAME_LENGTH:
        return f"Mirror name is longer than {MAX_NAME_LENGTH} characters"
    if not _LEGAL.fullmatch(name):
        return (f"Mirror name '{name}' is illegal, it contains a character other than "
                "ASCII alphanumerics, '.', '_' and '-'")
    for suffix in FORBIDDEN_SUFFIXES:
        if name.endswith(suffix):
            return f"Mirror name '{name}' cannot end with '{suffix}'"
    return None
