from __future__ import annotations

import pytest

from kmirror.cli.errors import CommandError
from kmirror.cli.user_scram import format_scram_description, split_scram_configs, split_top_level
from kmirror.client.scram_credentials import ScramDelete, ScramUpsert
from kmirror.security.scram import ScramMechanism

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def test_kafka_configs_syntax_with_brackets_defaults_and_other_keys() -> None:
    alterations, adds, deletes = split_scram_configs(
        "alice", ["SCRAM-SHA-256=[iterations=8192,password=a=b],consumer_byte_rate=1024",
                  "SCRAM-SHA-512=[password=x]"], ["SCRAM-SHA-512,producer_byte_rate"])
    assert alterations == [ScramUpsert("alice", SHA256, 8192, "a=b"), ScramUpsert("alice", SHA512, 4096, "x"),
                           ScramDelete("alice", SHA512)]
    assert (adds, deletes) == (["consumer_byte_rate=1024"], ["producer_byte_rate"])


@pytest.mark.parametrize("config, message", [
    ("SCRAM-SHA-256=[iterations=8192]", "needs password"),
    ("SCRAM-SHA-256=[iterations=many,password=p]", "invalid iterations"),
    ("SCRAM-SHA-256=[salt=x,password=p]", "unknown SCRAM-SHA-256 field"),
    ("SCRAM-SHA-256=[password=p", "unbalanced"),
])
def test_bad_scram_configs_are_one_line_errors(config: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        split_scram_configs("alice", [config], None)


def test_split_top_level_and_describe_format() -> None:
    assert split_top_level("a=[x=1,y=2],b=3") == ["a=[x=1,y=2]", "b=3"]
    assert format_scram_description("alice", [(SHA256, 8192), (SHA512, 4096)]) == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
        "SCRAM-SHA-512=iterations=4096")
