"""Option `kmirror.delegationToken`: when the driver renews or replaces its token, and that
what is pickled for the executors carries no driver credential."""

from __future__ import annotations

import pickle

from pyspark.sql.datasource import DataSource

from kmirror.client.delegation_tokens import DelegationToken
from kmirror.spark.delegation_token import task_configs, token_plan, without_credentials
from kmirror.spark.options import parse_source_options
from kmirror.spark.source import BatchReader, KmirrorDataSource, RangePartition, StreamReader, kafka_schema

JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="bob-secret";'
OPTIONS = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", "kafka.security.protocol": "SASL_PLAINTEXT",
           "kafka.sasl.mechanism": "SCRAM-SHA-256", "kafka.sasl.jaas.config": JAAS, "kmirror.delegationToken": "true"}
TOKEN = DelegationToken("tid", b"\x01" * 64, "User:bob", "User:bob", (), 0, 10_000, 100_000)


def test_the_driver_renews_at_half_the_time_to_expiry_and_replaces_near_the_max_lifetime() -> None:
    assert token_plan(None, 0, 0) == "replace"
    assert token_plan(TOKEN, 0, 4_999) == "keep"
    assert token_plan(TOKEN, 0, 5_000) == "renew"
    assert token_plan(TOKEN, 0, 10_000) == "replace"  # expired
    near_max = DelegationToken("tid", b"\x01" * 64, "User:bob", "User:bob", (), 0, 100_000, 100_000)
    assert token_plan(near_max, 90_000, 95_000) == "replace"  # renewals end at the max lifetime


def test_tasks_log_in_with_the_token_and_nothing_of_the_driver() -> None:
    driver = {"bootstrap.servers": "b:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI",
              "sasl.jaas.config": "Krb5LoginModule required keyTab=/k;", "sasl.kerberos.service.name": "kafka",
              "ssl.truststore.location": "/ca.pem"}
    tasks = task_configs(driver, TOKEN, "SCRAM-SHA-512")
    assert tasks == {"bootstrap.servers": "b:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                     "ssl.truststore.location": "/ca.pem", "sasl.jaas.config": TOKEN.jaas_config()}
    assert 'tokenauth="true"' in tasks["sasl.jaas.config"]
    assert "sasl.jaas.config" not in without_credentials(driver)


def test_what_is_pickled_for_executors_holds_no_driver_password() -> None:
    for reader in (BatchReader(parse_source_options(OPTIONS, streaming=False)),
                   StreamReader(parse_source_options(OPTIONS, streaming=True))):
        assert reader.token is not None
        data = pickle.dumps(reader)
        assert b"bob-secret" not in data
        copy = pickle.loads(data)
        assert copy.token is None and "sasl.jaas.config" not in copy.settings.client_configs
        assert reader.options.client_configs["sasl.jaas.config"] == JAAS  # the driver keeps its login
    source = KmirrorDataSource(dict(OPTIONS))
    assert isinstance(source, DataSource)
    source.reader(kafka_schema(False))
    assert b"bob-secret" not in pickle.dumps(source)
    partition = RangePartition(None, {"sasl.jaas.config": TOKEN.jaas_config()})
    assert pickle.loads(pickle.dumps(partition)).client_configs == partition.client_configs


def test_without_the_option_nothing_changes() -> None:
    options = {k: v for k, v in OPTIONS.items() if k != "kmirror.delegationToken"}
    reader = BatchReader(parse_source_options(options, streaming=False))
    assert reader.token is None and b"bob-secret" in pickle.dumps(reader)
    source = KmirrorDataSource(dict(options))
    source.reader(kafka_schema(False))
    assert source.options["kafka.sasl.jaas.config"] == JAAS


class FixedToken:
    """The driver's token port, without a cluster: the configs a task would log in with."""

    def task_configs(self) -> dict[str, str]:
        return {"bootstrap.servers": "127.0.0.1:1", "sasl.jaas.config": TOKEN.jaas_config()}


def test_each_micro_batch_hands_its_tasks_the_drivers_current_token() -> None:
    reader = StreamReader(parse_source_options(OPTIONS, streaming=True))
    reader.token = FixedToken()  # type: ignore[assignment]
    parts = reader.partitions({"t": {"0": 0, "1": 5}}, {"t": {"0": 10, "1": 5}})
    assert [(p.offset_range.partition, p.client_configs) for p in parts] == [(0, FixedToken().task_configs())]
