"""Typed configuration definitions (Kafka's `ConfigDef`): type, default, validator, doc.

A definition turns the string form of a value into its typed form or explains in one line
why it cannot. Used for broker keys (`server.properties`) and topic keys alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1
LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1


class ConfigError(ValueError):
    """A configuration the node refuses; `str()` is one line naming the key and why."""


class ConfigType(Enum):
    INT = "int"
    LONG = "long"
    SHORT = "short"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"
    PASSWORD = "password"


# Kafka's DescribeConfigs `config_type` codes (KIP-569).
DESCRIBE_TYPE_CODES = {
    ConfigType.BOOLEAN: 1,
    ConfigType.STRING: 2,
    ConfigType.INT: 3,
    ConfigType.SHORT: 4,
    ConfigType.LONG: 5,
    ConfigType.DOUBLE: 6,
    ConfigType.LIST: 7,
    ConfigType.PASSWORD: 9,
}

Validator = Callable[[Any], str | None]
"""Returns None when the typed value is acceptable, else the reason (`expected ...`)."""


@dataclass(frozen=True, slots=True)
class ConfigDef:
    name: str
    type: ConfigType
    default: str | None
    doc: str = ""
    validator: Validator | None = None
    read_only: bool = True
    sensitive: bool = False

    def parse(self, raw: str | None) -> Any:
        """The typed value of `raw` (None stays None); raises ConfigError naming the key."""
        if raw is None:
            return None
        value = _parse_typed(self.name, self.type, raw)
        if self.validator is not None:
            reason = self.validator(value)
            if reason is not None:
                raise ConfigError(f"invalid value {raw!r} for {self.name!r}: {reason}")
        return value

    def default_value(self) -> Any:
        return self.parse(self.default)


def _parse_typed(name: str, kind: ConfigType, raw: str) -> Any:
    text = raw.strip()
    if kind in (ConfigType.INT, ConfigType.LONG, ConfigType.SHORT):
        lo, hi, what = {
            ConfigType.INT: (INT_MIN, INT_MAX, "an integer"),
            ConfigType.LONG: (LONG_MIN, LONG_MAX, "a long"),
            ConfigType.SHORT: (-(2**15), 2**15 - 1, "a short"),
        }[kind]
        try:
            value = int(text, 10)
        except ValueError:
            raise ConfigError(f"invalid value {raw!r} for {name!r}: expected {what}") from None
        if not lo <= value <= hi:
            raise ConfigError(f"invalid value {raw!r} for {name!r}: expected {what}") from None
        return value
    if kind is ConfigType.DOUBLE:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"invalid value {raw!r} for {name!r}: expected a number") from None
    if kind is ConfigType.BOOLEAN:
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ConfigError(f"invalid value {raw!r} for {name!r}: expected true or false")
        return lowered == "true"
    if kind is ConfigType.LIST:
        return [item.strip() for item in text.split(",") if item.strip()]
    return text


@dataclass(frozen=True, slots=True)
class DescribedValidator:
    """A validator with its valid values in Kafka's notation (`[1,...]`, `[0,...,1]`,
    `[delete, compact]`), as Kafka's generated config docs print them (docs/configs.md)."""

    check: Validator
    valid_values: str

    def __call__(self, value: Any) -> str | None:
        return self.check(value)


def valid_values(validator: Validator | None) -> str | None:
    """The valid values of `validator` in Kafka's notation, None when it cannot say."""
    return validator.valid_values if isinstance(validator, DescribedValidator) else None


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def at_least(minimum: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if value >= minimum else f"expected a value >= {minimum:g}"

    return DescribedValidator(check, f"[{_number(minimum)},...]")


def between(lo: float, hi: float) -> Validator:
    def check(value: Any) -> str | None:
        return None if lo <= value <= hi else f"expected a value in [{lo:g}, {hi:g}]"

    return DescribedValidator(check, f"[{_number(lo)},...,{_number(hi)}]")


def one_of(*choices: str, case_insensitive: bool = False) -> Validator:
    def check(value: Any) -> str | None:
        found = value.lower() in {c.lower() for c in choices} if case_insensitive else value in choices
        return None if found else f"expected one of {', '.join(choices)}"

    text = f"[{', '.join(choices)}]"
    return DescribedValidator(check, f"{text} (case-insensitive)" if case_insensitive else text)


def each_of(*choices: str, allow_empty: bool = False) -> Validator:
    """For LIST values: every item must be one of `choices`."""

    def check(value: Sequence[str]) -> str | None:
        if not value and not allow_empty:
            return f"expected a non-empty list of {', '.join(choices)}"
        bad = [v for v in value if v not in choices]
        return None if not bad else f"expected items among {', '.join(choices)}"

    kind = "a list of" if allow_empty else "a non-empty list of"
    return DescribedValidator(check, f"{kind} [{', '.join(choices)}]")
