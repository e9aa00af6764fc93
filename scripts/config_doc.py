"""Write the reference tables of every config key kmirror accepts into docs/configs.md.

The tables come from the config definitions the node parses and validates with: broker keys
(`kmirror.config.broker_keys.BROKER_CONFIG_DEFS`, mirror and quota window keys included, with
`DYNAMIC_BROKER_KEYS` for what IncrementalAlterConfigs may change at runtime), topic keys
(`TOPIC_CONFIG_DEFS` and their broker synonyms), GROUP resource keys (`GROUP_CONFIG_DEFS` and
the broker keys bounding them), MIRROR resource keys and the source connection keys
(`kmirror.config.mirror`), and client quota keys. The text between the
`<!-- configs:begin -->` and `<!-- configs:end -->` lines is replaced.

Usage: python scripts/config_doc.py [--check]
  --check  write nothing; exit 1 when docs/configs.md is not current.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable
from pathlib import Path

from doc_section import main, replace_section

from kmirror.config.broker_keys import BROKER_CONFIG_DEFS
from kmirror.config.client_quotas import CLIENT_QUOTA_KEYS, IP_QUOTA_KEYS, QUOTA_CONFIG_DOCS
from kmirror.config.definitions import ConfigDef, ConfigType, valid_values
from kmirror.config.group import DEFAULT_BOUNDS, GROUP_CONFIG_BOUNDS, GROUP_CONFIG_DEFS
from kmirror.config.mirror import MIRROR_CONFIG_DEFS, SOURCE_CONNECTION_CONFIG_DEFS
from kmirror.config.topic import TOPIC_CONFIG_DEFS
from kmirror.metadata.controller.configs import DYNAMIC_BROKER_KEYS
from kmirror.security.listener_config import LISTENER_PREFIX, LISTENER_SECURITY_KEYS

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "configs.md"
BEGIN = "<!-- configs:begin -->"
END = "<!-- configs:end -->"


def _text(text: str) -> str:
    """Markdown-safe table cell text: pipes, asterisks and word-initial underscores escaped."""
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*")
    return re.sub(r"(?<![A-Za-z0-9])_", r"\\_", text)


def _code(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`"


def _default(d: ConfigDef) -> str:
    """A secret never shows a default; a list reads item by item."""
    if d.default is None or d.sensitive or d.type is ConfigType.PASSWORD:
        return "null"
    if d.default == "":
        return '`""`'
    if d.type is ConfigType.LIST:
        return _code(", ".join(item.strip() for item in d.default.split(",")))
    return _code(d.default)


def _valid(d: ConfigDef) -> str:
    text = valid_values(d.validator)
    return "" if text is None else _code(text)


def _doc(d: ConfigDef) -> str:
    """The definition's doc, its "Accepted, ignored" (or "Accepted") opening in bold."""
    doc = _text(d.doc)
    for opening in ("Accepted, ignored", "Accepted"):
        if doc.startswith(opening):
            return f"**{opening}**{doc[len(opening):]}"
    return doc


def _table(header: Iterable[str], rows: Iterable[Iterable[str]]) -> list[str]:
    header = list(header)
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _broker_section() -> list[str]:
    defs = sorted(BROKER_CONFIG_DEFS.values(), key=lambda d: d.name)
    dynamic = sum(d.name in DYNAMIC_BROKER_KEYS for d in defs)
    rows = ([_code(d.name), d.type.value, _default(d), "yes" if d.name in DYNAMIC_BROKER_KEYS else "no", _valid(d),
             _doc(d)] for d in defs)
    per_listener = ", ".join(_code(k) for k in sorted(LISTENER_SECURITY_KEYS))
    return [
        "## Broker configs",
        "",
        f"{len(defs)} keys ({dynamic} dynamic), mirror (KIP-1279) and quota window keys included.",
        "",
        *_table(["Key", "Type", "Default", "Dynamic", "Valid values", "Description"], rows),
        "",
        f"Per listener, as `{LISTENER_PREFIX}<listener>.<key>` (winning over the unprefixed key): "
        f"{per_listener}; and `{LISTENER_PREFIX}<listener>.<mechanism>.sasl.jaas.config`.",
    ]


def _topic_section() -> list[str]:
    defs = sorted(TOPIC_CONFIG_DEFS.values(), key=lambda t: t.name)
    rows = ([_code(t.name), t.definition.type.value, _default(t.definition),
             ", ".join(_code(s) for s in t.synonyms), _valid(t.definition), _doc(t.definition)] for t in defs)
    return [
        "## Topic configs",
        "",
        f"{len(defs)} keys. A topic without an override takes the first broker synonym that is set "
        "(dynamic, then `server.properties`), else the default.",
        "",
        *_table(["Key", "Type", "Default", "Broker synonyms", "Valid values", "Description"], rows),
    ]


def _bound(key: str) -> str:
    """A bound is a broker key of the controller's configuration, or Kafka's default."""
    return _code(key) if key in BROKER_CONFIG_DEFS else f"{DEFAULT_BOUNDS[key]} (Kafka's `{key}`)"


def _group_section() -> list[str]:
    defs = sorted(GROUP_CONFIG_DEFS.values(), key=lambda d: d.name)

    def bounds(name: str) -> str:
        if name not in GROUP_CONFIG_BOUNDS:
            return ""
        low, high = GROUP_CONFIG_BOUNDS[name]
        return f"{_bound(low)} to {_bound(high)}"

    rows = ([_code(d.name), d.type.value, _default(d), bounds(d.name), _valid(d), _doc(d)] for d in defs)
    return [
        "## Group configs",
        "",
        f"{len(defs)} keys. A value outside its bounds is INVALID\\_CONFIG; so is a session timeout not "
        "above the heartbeat interval of the same protocol.",
        "",
        *_table(["Key", "Type", "Default", "Bounds", "Valid values", "Description"], rows),
    ]


def _mirror_sections() -> list[str]:
    mirror = sorted(MIRROR_CONFIG_DEFS, key=lambda d: d.name)
    connection = sorted(SOURCE_CONNECTION_CONFIG_DEFS, key=lambda d: d.name)
    return [
        "## Mirror configs",
        "",
        f"{len(mirror)} keys. The list keys take IncrementalAlterConfigs APPEND and SUBTRACT.",
        "",
        *_table(["Key", "Type", "Default", "Description"],
                ([_code(d.name), d.type.value, _default(d), _doc(d)] for d in mirror)),
        "",
        "## Mirror source connection configs",
        "",
        f"{len(connection)} keys, Kafka client names, set beside the mirror configs. Any other `sasl.*` or "
        "`ssl.*` key is stored and not read. Secrets (password type) are described as null.",
        "",
        *_table(["Key", "Type", "Default", "Description"],
                ([_code(d.name), d.type.value, _default(d), _doc(d)] for d in connection)),
    ]


def _quota_section() -> list[str]:
    entities = {**{k: "user, client-id, or both" for k in CLIENT_QUOTA_KEYS}, **{k: "ip" for k in IP_QUOTA_KEYS}}
    kinds = {**CLIENT_QUOTA_KEYS, **IP_QUOTA_KEYS}
    rows = ([_code(k), kinds[k].value, entities[k], _text(QUOTA_CONFIG_DOCS[k])] for k in sorted(kinds))
    return [
        "## Client quota configs",
        "",
        f"{len(kinds)} keys; none is set by default (no limit).",
        "",
        *_table(["Key", "Type", "Entities", "Description"], rows),
    ]


def render() -> str:
    lines = [
        BEGIN,
        "",
        "Generated by `scripts/config_doc.py` from the config definitions in `src/kmirror/config/`.",
        "",
    ]
    for section in (_broker_section(), _topic_section(), _group_section(), _mirror_sections(), _quota_section()):
        lines += [*section, ""]
    lines.append(END)
    return "\n".join(lines)


def updated(text: str) -> str:
    return replace_section(text, BEGIN, END, render())


if __name__ == "__main__":
    sys.exit(main(__doc__.splitlines()[0], DOC, updated, "python scripts/config_doc.py"))
