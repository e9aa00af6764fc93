"""KIP-1066 on the controller and in config: the cordoned log directories a heartbeat reports
are stored once per change, survive a snapshot and a re-registration, and keep a wholly
cordoned broker out of automatic placement; `cordoned.log.dirs` values resolve as Kafka
validates them."""

import uuid

import pytest

from kmirror.config.cordoned_log_dirs import cordoned, resolve
from kmirror.config.definitions import ConfigError
from kmirror.metadata.controller.brokers import BrokerHeartbeatManager, broker_heartbeat, register_broker
from kmirror.metadata.controller.placement import usable_broker_ids
from kmirror.metadata.image import EMPTY_IMAGE, MetadataImage
from kmirror.metadata.records import BrokerEndpoint, BrokerRegistrationChangeRecord, Record, decode, encode
from kmirror.metadata.snapshot import snapshot_records
from kmirror.testing.metadata import image_with_brokers

D1, D2 = uuid.UUID(int=1), uuid.UUID(int=2)
ENDPOINTS = (BrokerEndpoint("PLAINTEXT", "h", 1),)


def _apply(image: MetadataImage, records: list[Record]) -> MetadataImage:
    return image.apply(records, image.offset + max(1, len(records)))


def _registered(hb: BrokerHeartbeatManager) -> tuple[MetadataImage, int]:
    image = image_with_brokers(1, 2)
    result = register_broker(image, 5, uuid.UUID(int=99), ENDPOINTS, None, hb, (D1, D2))
    image = _apply(image, result.records)
    assert result.response is not None
    return image, result.response


def _beat(image: MetadataImage, epoch: int, hb: BrokerHeartbeatManager, cordoned) -> tuple[MetadataImage, list]:
    result = broker_heartbeat(image, 5, epoch, epoch, False, False, hb, 0, False, cordoned)
    changes = [r for r in result.records if isinstance(r, BrokerRegistrationChangeRecord)]
    return _apply(image, result.records), changes


def test_a_broker_with_every_directory_cordoned_is_left_out_of_placement() -> None:
    hb = BrokerHeartbeatManager()
    image, epoch = _registered(hb)
    image, _ = _beat(image, epoch, hb, None)  # unfenced, nothing reported yet: usable
    assert image.brokers[5].log_dirs == (D1, D2) and 5 in usable_broker_ids(image)
    image, changes = _beat(image, epoch, hb, (D1,))
    assert len(changes) == 1 and 5 in usable_broker_ids(image)
    image, changes = _beat(image, epoch, hb, (D2, D1))
    assert len(changes) == 1 and 5 not in usable_broker_ids(image)
    image, changes = _beat(image, epoch, hb, (D1, D2))  # the same set: nothing written
    assert changes == []
    image, changes = _beat(image, epoch, hb, None)  # not reported: kept
    assert changes == [] and 5 not in usable_broker_ids(image)

    restored = EMPTY_IMAGE.apply([decode(encode(r)) for r in snapshot_records(image)], image.offset)
    assert restored.brokers[5].cordoned_log_dirs == (D2, D1) and 5 not in usable_broker_ids(restored)

    again = register_broker(image, 5, uuid.UUID(int=100), ENDPOINTS, None, hb, (D1, D2))
    image = _apply(image, again.records)
    assert image.brokers[5].cordoned_log_dirs == (D2, D1)  # a restarting cordoned broker stays out
    image, changes = _beat(image, image.brokers[5].broker_epoch, hb, ())
    assert len(changes) == 1 and 5 in usable_broker_ids(image)


def test_values_resolve_against_the_log_dirs() -> None:
    dirs = ["/d1", "/d2"]
    assert resolve("", dirs) == [] and resolve("/d2, /d1,/d1", dirs) == ["/d1", "/d2"]
    assert resolve("*", dirs) == dirs
    with pytest.raises(ConfigError, match="When cordoned.log.dirs is set to \\*, it must not contain other values"):
        resolve("*,/d1", dirs)
    with pytest.raises(ConfigError, match="Missing entries : /x, /y"):
        resolve("/x,/d1,/y", dirs)
    assert cordoned("/d1", {}, dirs) == ["/d1"]
    assert cordoned("/d1", {"cordoned.log.dirs": "/d2"}, dirs) == ["/d2"]  # the dynamic value wins
    assert cordoned("/d1", {"cordoned.log.dirs": ""}, dirs) == []
    assert cordoned("/d1", {"cordoned.log.dirs": "/elsewhere"}, dirs) == ["/d1"]


def test_a_static_value_naming_another_directory_refuses_to_start() -> None:
    from kmirror.testing.metadata import server_config

    assert server_config(**{"log.dirs": "/d1,/d2", "cordoned.log.dirs": "/d2"}).cordoned_log_dirs({}) == ["/d2"]
    with pytest.raises(ConfigError, match="invalid value for 'cordoned.log.dirs': All entries in cordoned.log.dirs "
                                          "must be present in log.dirs or log.dir. Missing entries : /d3"):
        server_config(**{"log.dirs": "/d1,/d2", "cordoned.log.dirs": "/d3"})
