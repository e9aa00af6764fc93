"""`cordoned.log.dirs` (KIP-1066): log directories that keep serving their replicas but take no
new one. A broker whose directories are all cordoned gets no new partitions from the
controller's automatic placement: the first step of decommissioning a broker or a disk.

The value is a list of entries of `log.dirs` (or `log.dir`), or `*` for all of them. It is a
per-broker dynamic config: a broker's own dynamic value, when it has one, replaces its static
one (Kafka's DynamicBrokerConfig.PER_BROKER_CONFIGS).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kmirror.config.definitions import ConfigError

CORDONED_LOG_DIRS = "cordoned.log.dirs"
ALL = "*"


def syntax_error(entries: Sequence[str]) -> str | None:
    """The ConfigDef check, which needs no log directories: `*` stands alone."""
    if ALL in entries and len(entries) > 1:
        return f"When {CORDONED_LOG_DIRS} is set to {ALL}, it must not contain other values"
    return None


def entries(value: str) -> list[str]:
    """A LIST value's entries, without blanks and duplicates."""
    out: list[str] = []
    for item in value.split(","):
        item = item.strip()
        if item and item not in out:
            out.append(item)
    return out


def resolve(value: str, log_dirs: Sequence[str]) -> list[str]:
    """The directories of `log_dirs` that `value` cordons; ConfigError with Kafka's message
    (KafkaConfig.validateCordonedLogDirs) when it names another directory."""
    wanted = entries(value)
    reason = syntax_error(wanted)
    if reason is not None:
        raise ConfigError(reason)
    if wanted == [ALL]:
        return list(log_dirs)
    missing = [e for e in wanted if e not in log_dirs]
    if missing:
        raise ConfigError(f"All entries in {CORDONED_LOG_DIRS} must be present in log.dirs or log.dir. "
                          f"Missing entries : {', '.join(missing)}")
    return [d for d in log_dirs if d in wanted]


def cordoned(static_value: str | None, node_configs: Mapping[str, str], log_dirs: Sequence[str]) -> list[str]:
    """The directories cordoned now: from the broker's dynamic value when it has one, else its
    static one. A dynamic value that names another broker's directories (it was set through
    another node, which could not check it) cordons what the static value cordons."""
    dynamic = node_configs.get(CORDONED_LOG_DIRS)
    if dynamic is not None:
        try:
            return resolve(dynamic, log_dirs)
        except ConfigError:
            pass
    return resolve(static_value or "", log_dirs)
