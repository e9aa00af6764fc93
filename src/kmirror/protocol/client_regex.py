"""Regular expressions that clients send: KIP-848's SubscribedTopicRegex and KIP-1152's
TransactionalIdPattern. Kafka compiles both with RE2J, so kmirror compiles them with RE2
(google-re2): the same syntax (no backreferences or lookaround), and matching in time linear in
the text whatever the pattern. A backtracking engine (Python's `re`) can take exponential time
on a crafted pattern such as `(a+)+$` against a long id, and a node matches on its event loop.
"""

from __future__ import annotations

from typing import Protocol

import re2  # type: ignore[import-untyped]


class ClientRegex(Protocol):
    def fullmatch(self, text: str) -> object | None: ...


class InvalidClientRegex(ValueError):
    """A pattern RE2 does not compile; the message says why."""


def compile_client_regex(pattern: str) -> ClientRegex:
    options = re2.Options()
    options.log_errors = False  # a client's bad pattern is its error answer, not a line on the node's stderr
    try:
        compiled: ClientRegex = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        raise InvalidClientRegex(reason.decode(errors="replace") if isinstance(reason, bytes) else str(reason)) from None
    return compiled
