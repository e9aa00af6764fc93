"""docs/configs.md lists every config key the definitions hold (what scripts/config_doc.py
makes of them), and the mirror definitions behind it agree with the rules that parse and
describe mirror configs."""


from kmirror.config.broker_keys import BROKER_CONFIG_DEFS
from kmirror.config.client_quotas import CLIENT_QUOTA_KEYS, IP_QUOTA_KEYS, QUOTA_CONFIG_DOCS
from kmirror.config.definitions import ConfigType
from kmirror.config.group import GROUP_CONFIG_DEFS
from kmirror.config.mirror import (
    DEFAULT_TOPIC_PROPERTIES_EXCLUDE,
    MIRROR_CONFIG_DEFAULTS,
    MIRROR_CONFIG_DEFS,
    MIRROR_LIST_CONFIGS,
    SOURCE_CONNECTION_CONFIG_DEFS,
    is_mirror_config_key,
    is_sensitive_mirror_config,
)
from kmirror.config.topic import TOPIC_CONFIG_DEFS
from kmirror.metadata.controller.configs import DYNAMIC_BROKER_KEYS
from kmirror.security.client_config import CLIENT_SECURITY_KEYS
from kmirror.testing.scripts import load_script

doc = load_script("config_doc")


def _sections() -> dict[str, dict[str, list[str]]]:
    """Section title -> key -> the row's cells."""
    sections: dict[str, dict[str, list[str]]] = {}
    title = ""
    for line in doc.render().splitlines():
        if line.startswith("## "):
            title = line[3:]
            sections[title] = {}
        elif line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            key = cells[0].strip("`")
            assert key not in sections[title], (title, key)
            sections[title][key] = cells
    return sections


def test_configs_md_is_current() -> None:
    text = doc.DOC.read_text(encoding="utf-8")
    assert doc.updated(text) == text, "regenerate with `python scripts/config_doc.py`"


def test_every_defined_key_has_one_row_in_its_section() -> None:
    sections = _sections()
    assert set(sections["Broker configs"]) == set(BROKER_CONFIG_DEFS)
    assert set(sections["Topic configs"]) == set(TOPIC_CONFIG_DEFS)
    assert set(sections["Group configs"]) == set(GROUP_CONFIG_DEFS)
    assert set(sections["Mirror configs"]) == {d.name for d in MIRROR_CONFIG_DEFS}
    assert set(sections["Mirror source connection configs"]) == {d.name for d in SOURCE_CONNECTION_CONFIG_DEFS}
    assert set(sections["Client quota configs"]) == {*CLIENT_QUOTA_KEYS, *IP_QUOTA_KEYS} == set(QUOTA_CONFIG_DOCS)


def test_broker_rows_show_type_default_dynamic_and_valid_values() -> None:
    broker = _sections()["Broker configs"]
    assert broker["message.max.bytes"][1:5] == ["int", "`1048588`", "yes", "`[0,...]`"]
    assert broker["node.id"][1:5] == ["int", "null", "no", "`[0,...]`"]
    assert broker["log.cleaner.min.cleanable.ratio"][4] == "`[0,...,1]`"
    assert broker["compression.type"][4] == "`[uncompressed, zstd, lz4, snappy, gzip, producer]`"
    assert broker["socket.send.buffer.bytes"][5].startswith("**Accepted, ignored**")
    assert {k for k, cells in broker.items() if cells[3] == "yes"} == DYNAMIC_BROKER_KEYS


def test_topic_rows_name_their_broker_synonyms() -> None:
    topic = _sections()["Topic configs"]
    assert topic["retention.ms"][2:4] == ["`604800000`", "`log.retention.ms`, `log.retention.minutes`, `log.retention.hours`"]
    assert topic["segment.jitter.ms"][3] == "`log.roll.jitter.ms`, `log.roll.jitter.hours`"


def test_group_rows_name_the_broker_keys_that_bound_them() -> None:
    group = _sections()["Group configs"]
    assert group["consumer.session.timeout.ms"][3] == (
        "`group.consumer.min.session.timeout.ms` to `group.consumer.max.session.timeout.ms`")


def test_secrets_never_show_a_default() -> None:
    sections = _sections()
    defs = [*BROKER_CONFIG_DEFS.values(), *(t.definition for t in TOPIC_CONFIG_DEFS.values()),
            *GROUP_CONFIG_DEFS.values(), *MIRROR_CONFIG_DEFS, *SOURCE_CONNECTION_CONFIG_DEFS]
    secrets = {d.name for d in defs if d.sensitive or d.type is ConfigType.PASSWORD}
    assert {"ssl.keystore.password", "sasl.jaas.config", "ssl.key.password"} <= secrets
    for rows in sections.values():
        for key, cells in rows.items():
            if key in secrets:
                assert cells[2] == "null", cells


def test_mirror_definitions_agree_with_the_mirror_config_rules() -> None:
    defs = [*MIRROR_CONFIG_DEFS, *SOURCE_CONNECTION_CONFIG_DEFS]
    assert all(is_mirror_config_key(d.name) for d in defs)
    for d in defs:
        assert (d.type is ConfigType.PASSWORD) is d.sensitive is is_sensitive_mirror_config(d.name), d.name
        assert (d.type is ConfigType.LIST) is (d.name in MIRROR_LIST_CONFIGS), d.name
    assert {d.name for d in SOURCE_CONNECTION_CONFIG_DEFS} == CLIENT_SECURITY_KEYS
    assert MIRROR_CONFIG_DEFAULTS == {"mirror.topic.properties.exclude": ",".join(DEFAULT_TOPIC_PROPERTIES_EXCLUDE),
                                      "mirror.groups.include": ".*", "mirror.acl.include": "*",
                                      "mirror.topics.include": ""}
    assert MIRROR_LIST_CONFIGS == {"bootstrap.servers", *MIRROR_CONFIG_DEFAULTS}
