"""Java `.properties` parsing (java.util.Properties.load rules), sans-IO.

Rules kept: comment lines start with `#` or `!`; a key ends at the first unescaped `=`, `:`
or whitespace; whitespace around the separator is skipped; a line ending in an odd number of
backslashes continues on the next line (leading whitespace of the continuation dropped);
escapes `\\t \\n \\r \\f \\uXXXX` and `\\<any>` -> `<any>`. Later duplicates win.
"""

from __future__ import annotations

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesSyntaxError(ValueError):
    """A malformed escape (`\\u` not followed by four hex digits)."""


def parse_properties(text: str) -> dict[str, str]:
    result: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split(logical)
        result[_unescape(key)] = _unescape(value)
    return result


def _logical_lines(text: str) -> list[str]:
    out: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue
            current = line
        else:
            current = pending + line
        if _ends_with_continuation(current):
            pending = current[:-1]
            continue
        pending = None
        out.append(current)
    if pending is not None:
        out.append(pending)
    return out


def _ends_with_continuation(line: str) -> bool:
    n = len(line) - len(line.rstrip("\\"))
    return n % 2 == 1


def _split(line: str) -> tuple[str, str]:
    i = 0
    n = len(line)
    while i < n:
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=: \t\f":
            break
        i += 1
    key = line[:i]
    j = i
    while j < n and line[j] in " \t\f":
        j += 1
    if j < n and line[j] in "=:":
        j += 1
        while j < n and line[j] in " \t\f":
            j += 1
    return key, line[j:]


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        e = s[i + 1]
        if e == "u":
            digits = s[i + 2 : i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesSyntaxError(f"malformed \\uxxxx encoding in {s!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(e, e))
        i += 2
    return "".join(out)
