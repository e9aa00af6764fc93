"""Client regular expressions compile with RE2, as Kafka's RE2J: linear-time matching."""

from __future__ import annotations

import re
import time

import pytest

from kmirror.protocol.client_regex import InvalidClientRegex, compile_client_regex


def test_a_pattern_that_backtracks_exponentially_matches_in_linear_time() -> None:
    """`(a+)+$` against 'aaa...!' takes a backtracking engine 2^n steps (Python's `re` over
    30 a's: minutes). RE2 answers at once; the bound is generous for a loaded machine."""
    pattern = compile_client_regex("(a+)+$")
    start = time.process_time()
    assert pattern.fullmatch("a" * 100_000 + "!") is None
    assert time.process_time() - start < 1.0


def test_kafka_re2j_syntax_and_full_matches() -> None:
    pattern = compile_client_regex("orders-.*|payments")
    assert pattern.fullmatch("orders-eu") and pattern.fullmatch("payments")
    assert not pattern.fullmatch("payments-2") and not pattern.fullmatch("x-orders-eu")


@pytest.mark.parametrize("bad, reason", [("(", "missing )"), ("(a)\\1", "invalid escape"), ("(?=a)", "perl operator")])
def test_what_re2_does_not_compile_is_refused_with_its_reason(bad: str, reason: str) -> None:
    """Backreferences and lookaround are not RE2's (nor RE2J's), as in Kafka."""
    with pytest.raises(InvalidClientRegex, match=re.escape(reason)):
        compile_client_regex(bad)
