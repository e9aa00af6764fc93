"""Kafka's inline JAAS configuration (`sasl.jaas.config`).

Grammar (Kafka's `JaasConfig`): `<LoginModuleClass> <flag> [<key>=<value>]... ;` with flag one
of required/requisite/sufficient/optional and values either bare words or double-quoted
strings (backslash escapes the next character). One login module per config, as Kafka
requires for `sasl.jaas.config`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
FLAGS = ("required", "requisite", "sufficient", "optional")
USER_PREFIX = "user_"

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.S)


class JaasConfigError(ValueError):
    """`sasl.jaas.config` cannot be parsed; `str()` says why in one line."""


@dataclass(frozen=True, slots=True)
class JaasConfig:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def users(self) -> dict[str, str]:
        """PlainLoginModule's broker-side credentials: `user_<name>="<password>"` options."""
        return {k[len(USER_PREFIX):]: v for k, v in self.options.items() if k.startswith(USER_PREFIX)}


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if not text[pos:].strip():
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasConfigError(f"unexpected character at position {pos}")
        quoted, word, eq, semi = m.groups()
        if quoted is not None:
            out.append(("value", re.sub(r"\\(.)", r"\1", quoted)))
        elif word is not None:
            out.append(("word", word))
        elif eq is not None:
            out.append(("=", "="))
        else:
            out.append((";", ";"))
        pos = m.end()
    return out


def parse_jaas_config(text: str) -> JaasConfig:
    tokens = _tokens(text)
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[1][0] != "word":
        raise JaasConfigError("expected '<LoginModule> <flag> [key=value]... ;'")
    module, flag = tokens[0][1], tokens[1][1].lower()
    if flag not in FLAGS:
        raise JaasConfigError(f"invalid control flag {tokens[1][1]!r} (expected one of {', '.join(FLAGS)})")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        if i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "=" or tokens[i + 2][0] == ";":
            raise JaasConfigError(f"expected key=value after {module}")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise JaasConfigError("login module entry must end with ';'")
    if i + 1 != len(tokens):
        raise JaasConfigError("expected exactly one login module")
    return JaasConfig(module, flag, options)
