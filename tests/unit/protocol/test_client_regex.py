"""Client regular expressions compile with RE2, as Kafka's RE2J: linear-time matching."""

from __future__ import annotations

import re

import pytest

from kmirror.protocol.client_regex import InvalidClientRegex, compile_client_regex


def test_a_pattern_that_backtracks_exponentially_is_answered() -> None:
    """`(a+)+$` against 'aaa...!' takes a backtracking engine 2^n steps (Python's `re`: 0.1 s
    at 22 a's, doubling with each more): over 100,000 a's a backtracking engine would never
    answer and the suite's timeout would fail this test; RE2 answers in time linear in the text."""
    assert compile_client_regex("(a+)+$").fullmatch("a" * 100_000 + "!") is None


def test_kafka_re2j_syntax_and_full_matches() -> None:
    pattern = compile_client_regex("orders-.*|payments")
    assert pattern.fullmatch("orders-eu") and pattern.fullmatch("payments")
    assert not pattern.fullmatch("payments-2") and not pattern.fullmatch("x-orders-eu")


@pytest.mark.parametrize("bad, reason", [("(", "missing )"), ("(a)\\1", "invalid escape"), ("(?=a)", "perl operator")])
def test_what_re2_does_not_compile_is_refused_with_its_reason(bad: str, reason: str) -> None:
    """Backreferences and lookaround are not RE2's (nor RE2J's), as in Kafka."""
    with pytest.raises(InvalidClientRegex, match=re.escape(reason)):
        compile_client_regex(bad)
