"""Kerberos principals and their short names, as Kafka's `KerberosName`, `KerberosRule` and
`KerberosShortNamer` make them from `sasl.kerberos.principal.to.local.rules` (Hadoop's
auth_to_local rules).

A principal is `service[/host]@REALM`; a name without `@` is already short and is kept as it
is (`service/host` without a realm included, as Kafka parses it). The rules, separated by
commas or newlines, are tried in order and the first that gives a name wins:

- `DEFAULT`: the first component, when the realm is the default realm;
- `RULE:[n:format](match)s/from/to/g` then optionally `/L` or `/U`: for a name of `n`
  components, `format` builds a string from `$0` (the realm), `$1` and `$2` (the components);
  when `match` (optional) matches all of it, `s/from/to/` (optional) replaces the first match
  of `from`, or every match with `g`, by `to` (`$1`, `${name}` name groups, `\\x` is a literal
  x, as Java's `replaceAll`); `/L` and `/U` lower- or upper-case the result.

A result holding `/` or `@` is refused, and so is a name no rule maps; both raise
`KerberosNameError` in Kafka's words. Regexes are Python's `re`, which reads the usual Java
syntax the same way. A `format` or `to` that Kafka would only refuse when a name reaches the
rule (`$3` in a rule of two components, `$x`, a group the `from` regex lacks) is refused when
the rules are parsed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

_NAME = re.compile(r"([^/@]*)(?:/([^/@]*))?@([^/@]*)")
_RULE = re.compile(
    r"(?P<default>DEFAULT)"
    r"|RULE:\[(?P<n>[0-9]*):(?P<format>[^\]]*)\](?:\((?P<match>[^)]*)\))?"
    r"(?:s/(?P<from>[^/]*)/(?P<to>[^/]*)/(?P<g>g)?)?/?(?P<case>[LU])?"
)
_NON_SIMPLE = re.compile(r"[/@]")
_ASCII_ALNUM = re.compile(r"[A-Za-z0-9]*")

Parts = tuple[str | int, ...]  # literal text, or the index of a parameter or regex group


class KerberosNameError(ValueError):
    """A malformed principal or rule, or a principal no rule maps (Kafka's `NoMatchingRule`)."""


@dataclass(frozen=True, slots=True)
class KerberosName:
    """A principal `service_name[/host_name][@realm]`."""

    service_name: str
    host_name: str | None = None
    realm: str | None = None

    @classmethod
    def parse(cls, principal: str) -> KerberosName:
        """`name`, `name@REALM` or `service/host@REALM`; without `@` the whole text is the name."""
        match = _NAME.fullmatch(principal)
        if match is not None:
            return cls(match[1], match[2], match[3])
        if "@" in principal:
            raise KerberosNameError(f"Malformed Kerberos name: {principal}")
        return cls(principal)

    def __str__(self) -> str:
        host = "" if self.host_name is None else f"/{self.host_name}"
        realm = "" if self.realm is None else f"@{self.realm}"
        return f"{self.service_name}{host}{realm}"


@dataclass(frozen=True, slots=True)
class KerberosRule:
    """One `DEFAULT` or `RULE:...` of `sasl.kerberos.principal.to.local.rules`."""

    is_default: bool = False
    default_realm: str | None = None  # DEFAULT's realm, unless short_name is given one
    num_components: int = 0
    format: str = ""
    match: re.Pattern[str] | None = None
    from_pattern: re.Pattern[str] | None = None
    to_pattern: str = ""
    repeat: bool = False
    case: str = ""  # "L", "U" or ""
    format_parts: Parts = field(default=(), repr=False, compare=False)
    to_parts: Parts = field(default=(), repr=False, compare=False)

    def __str__(self) -> str:
        if self.is_default:
            return "DEFAULT"
        text = f"RULE:[{self.num_components}:{self.format}]"
        if self.match is not None:
            text += f"({self.match.pattern})"
        if self.from_pattern is not None:
            text += f"s/{self.from_pattern.pattern}/{self.to_pattern}/{'g' if self.repeat else ''}"
        return text + (f"/{self.case}" if self.case else "")

    def apply(self, params: Sequence[str | None], default_realm: str | None = None) -> str | None:
        """The short name of `[realm, first, (second)]`, or None when the rule does not apply."""
        result = self._result(params, self.default_realm if default_realm is None else default_realm)
        if result is None:
            return None
        if _NON_SIMPLE.search(result):
            raise KerberosNameError(f"Non-simple name {result} after auth_to_local rule {self}")
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result

    def _result(self, params: Sequence[str | None], default_realm: str | None) -> str | None:
        if self.is_default:
            return params[1] if default_realm is not None and params[0] == default_realm else None
        if len(params) - 1 != self.num_components:
            return None
        base = "".join(p if isinstance(p, str) else _java_string(params[p]) for p in self.format_parts)
        if self.match is not None and self.match.fullmatch(base) is None:
            return None
        if self.from_pattern is None:
            return base
        return self.from_pattern.sub(self._replacement, base, count=0 if self.repeat else 1)

    def _replacement(self, match: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else match.group(p) or "" for p in self.to_parts)


def _java_string(value: str | None) -> str:
    return "null" if value is None else value  # as Java's StringBuilder.append(null)


DEFAULT_RULES: tuple[KerberosRule, ...] = (KerberosRule(is_default=True),)


def _format_parts(fmt: str, num_components: int) -> Parts:
    """`$n` (0 <= n <= num_components) and literal text, as Kafka's `replaceParameters`."""
    parts: list[str | int] = []
    for i, piece in enumerate(fmt.split("$")):
        if i == 0:
            parts.append(piece)
            continue
        digits = _leading_digits(piece)
        if not digits:
            raise ValueError(f"bad format in username mapping in {fmt}")
        if int(digits) > num_components:
            raise ValueError(f"index {int(digits)} from {fmt} is outside of the valid range 0 to {num_components}")
        parts += [int(digits), piece[len(digits):]]
    return tuple(p for p in parts if p != "")


def _leading_digits(text: str) -> str:
    end = 0
    while end < len(text) and text[end] in "0123456789":
        end += 1
    return text[:end]


def _replacement_parts(to: str, pattern: re.Pattern[str]) -> Parts:
    """A Java `replaceAll` replacement: `$n` and `${name}` groups, `\\x` a literal x."""
    parts: list[str | int] = []
    i = 0
    while i < len(to):
        if to[i] == "\\":
            if i + 1 == len(to):
                raise ValueError("character to be escaped is missing")
            parts.append(to[i + 1])
            i += 2
        elif to[i] == "$":
            group, i = _group_reference(to, i + 1, pattern)
            parts.append(group)
        else:
            parts.append(to[i])
            i += 1
    return _merge_literals(parts)


def _group_reference(to: str, i: int, pattern: re.Pattern[str]) -> tuple[int, int]:
    """The group `$` at `i - 1` names, and where the text goes on, as Java's `Matcher` reads it."""
    if i == len(to):
        raise ValueError("Illegal group reference: group index is missing")
    if to[i] == "{":
        name = _ASCII_ALNUM.match(to, i + 1)
        assert name is not None
        end = name.end()
        if not name[0] or end == len(to) or to[end] != "}" or name[0][0].isdigit():
            raise ValueError(f"Illegal named group reference in {to}")
        if name[0] not in pattern.groupindex:
            raise ValueError(f"No group with name {{{name[0]}}}")
        return pattern.groupindex[name[0]], end + 1
    if to[i] not in "0123456789":
        raise ValueError("Illegal group reference")
    group, i = int(to[i]), i + 1
    while i < len(to) and to[i] in "0123456789" and group * 10 + int(to[i]) <= pattern.groups:
        group, i = group * 10 + int(to[i]), i + 1
    if group > pattern.groups:
        raise ValueError(f"No group {group}")
    return group, i


def _merge_literals(parts: list[str | int]) -> Parts:
    merged: list[str | int] = []
    for part in parts:
        if isinstance(part, str) and merged and isinstance(merged[-1], str):
            merged[-1] += part
        else:
            merged.append(part)
    return tuple(merged)


def _parse_rule(rule: str, default_realm: str | None) -> KerberosRule:
    found = _RULE.match(rule)
    if found is None:
        raise KerberosNameError(f"Invalid rule: {rule}")
    if found.end() != len(rule):
        raise KerberosNameError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[found.end():]}`")
    if found["default"]:
        return KerberosRule(is_default=True, default_realm=default_realm)
    try:
        return _rule(found)
    except (ValueError, re.error) as exc:
        raise KerberosNameError(f"Invalid rule: {rule}: {exc}") from None


def _rule(found: re.Match[str]) -> KerberosRule:
    if not found["n"]:
        raise ValueError("the number of components is missing")
    num_components = int(found["n"])
    from_pattern = None if found["from"] is None else re.compile(found["from"])
    return KerberosRule(
        num_components=num_components,
        format=found["format"],
        match=None if found["match"] is None else re.compile(found["match"]),
        from_pattern=from_pattern,
        to_pattern=found["to"] or "",
        repeat=found["g"] is not None,
        case=found["case"] or "",
        format_parts=_format_parts(found["format"], num_components),
        to_parts=() if from_pattern is None else _replacement_parts(found["to"], from_pattern),
    )


def parse_rules(text: str, default_realm: str | None = None) -> tuple[KerberosRule, ...]:
    """`sasl.kerberos.principal.to.local.rules`, comma- or newline-separated, as Kafka's
    `KerberosShortNamer.parseRules`; `default_realm` is the realm `DEFAULT` keeps names of."""
    rules = (rule.strip() for rule in re.split(r"[,\n]", text))
    return tuple(_parse_rule(rule, default_realm) for rule in rules if rule)


def short_name(name: KerberosName, rules: Sequence[KerberosRule], default_realm: str | None = None) -> str:
    """The short name of `name`, from the first rule that maps it, as Kafka's
    `KerberosShortNamer.shortName`; `default_realm`, when given, is the realm of `DEFAULT`
    in place of the one the rules were parsed with."""
    if name.host_name is None and name.realm is None:
        return name.service_name
    params: tuple[str | None, ...] = (name.realm, name.service_name)
    if name.host_name is not None:
        params += (name.host_name,)
    for rule in rules:
        result = rule.apply(params, default_realm)
        if result is not None:
            return result
    raise KerberosNameError(f"No rules apply to {name}, rules [{', '.join(map(str, rules))}]")


def principal_to_local(
    principal: str, rules: Sequence[KerberosRule] = DEFAULT_RULES, default_realm: str | None = None
) -> str:
    """The short name of a principal's text (`KerberosName.parse` then `short_name`)."""
    return short_name(KerberosName.parse(principal), rules, default_realm)
