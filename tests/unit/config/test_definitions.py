"""Validators say what they accept, in Kafka's notation of valid values."""

import pytest

from kmirror.config.definitions import (
    ConfigDef,
    ConfigError,
    ConfigType,
    at_least,
    between,
    each_of,
    one_of,
    valid_values,
)


def test_valid_values_in_kafka_notation() -> None:
    assert valid_values(at_least(1)) == "[1,...]"
    assert valid_values(at_least(-2)) == "[-2,...]"
    assert valid_values(between(0, 1)) == "[0,...,1]"
    assert valid_values(between(0.5, 65535)) == "[0.5,...,65535]"
    assert valid_values(one_of("CreateTime", "LogAppendTime")) == "[CreateTime, LogAppendTime]"
    assert valid_values(each_of("delete", "compact", allow_empty=True)) == "a list of [delete, compact]"
    assert valid_values(each_of("broker", "controller")) == "a non-empty list of [broker, controller]"
    assert valid_values(lambda value: None) is None
    assert valid_values(None) is None


def test_described_validators_still_validate() -> None:
    d = ConfigDef("k", ConfigType.INT, "1", validator=at_least(1))
    assert d.parse("5") == 5
    with pytest.raises(ConfigError, match="expected a value >= 1"):
        d.parse("0")


def test_one_of_case_insensitive_accepts_any_case() -> None:
    check = one_of("PLAINTEXT", "SSL", case_insensitive=True)
    assert check("ssl") is None and check("Ssl") is None and check("SSL") is None
    assert check("tls") == "expected one of PLAINTEXT, SSL"
    assert valid_values(check) == "[PLAINTEXT, SSL] (case-insensitive)"
