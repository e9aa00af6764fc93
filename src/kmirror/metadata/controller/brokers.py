"""Broker registration (Kafka's ClusterControlManager), single active controller.

A registration is written fenced and then unfenced in the same batch: with no heartbeat
path yet, a registered broker of this controller is live. The broker epoch is the offset
the registration lands at, as in KRaft.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from kmirror.metadata.controller.result import ControllerResult
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.records import BrokerEndpoint, Record, RegisterBrokerRecord, UnfenceBrokerRecord


def register_broker(
    image: MetadataImage,
    broker_id: int,
    incarnation_id: uuid.UUID,
    endpoints: Sequence[BrokerEndpoint],
    rack: str | None,
) -> ControllerResult[int]:
    """Records registering `broker_id`; the response is its new broker epoch. Re-registering the
    same incarnation is a no-op returning the existing epoch."""
    current = image.brokers.get(broker_id)
    if (
        current is not None
        and current.incarnation_id == incarnation_id
        and tuple(current.endpoints) == tuple(endpoints)
        and current.rack == rack
        and not current.fenced
    ):
        return ControllerResult([], current.broker_epoch)
    epoch = image.offset + 1
    records: list[Record] = [
        RegisterBrokerRecord(broker_id, incarnation_id, epoch, tuple(endpoints), rack, True),
        UnfenceBrokerRecord(broker_id, epoch),
    ]
    return ControllerResult(records, epoch)
