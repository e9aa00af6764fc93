import datetime

import pytest

from kmirror.broker.handlers.init_producer_id import handle
from kmirror.metadata.image import MetadataImage
from kmirror.protocol.entities import build
from kmirror.protocol.errors import ErrorCode
from kmirror.testing.replication import call_handler, data_services, request_type, single_node_image


class Metadata:
    """The controller's producer id blocks; `image.producer_id_floor` is a fence replayed."""

    def __init__(self, block_size: int = 2) -> None:
        self.next = 0
        self.block_size = block_size
        self.calls: list[int] = []
        self.image = MetadataImage()

    async def allocate_producer_ids(self, node_id: int) -> tuple[int, int]:
        self.calls.append(node_id)
        first = self.next = max(self.next, self.image.producer_id_floor)
        self.next += self.block_size
        return first, self.block_size


def init(version: int, transactional_id: str | None = None, producer_id: int = -1, epoch: int = -1):
    return build(
        request_type(22, version),
        transactional_id=transactional_id,
        transaction_timeout=datetime.timedelta(seconds=60),
        producer_id=producer_id,
        producer_epoch=epoch,
    )


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4, 5])
def test_idempotent_producers_get_fresh_ids_with_epoch_zero(version: int) -> None:
    metadata = Metadata(block_size=2)
    services = data_services(single_node_image(1, {}), metadata=metadata)
    answers = [call_handler(handle, services, 22, version, init(version)) for _ in range(3)]
    assert [(a.error_code, a.producer_id, a.producer_epoch) for a in answers] == [
        (ErrorCode.none, 0, 0),
        (ErrorCode.none, 1, 0),
        (ErrorCode.none, 2, 0),
    ]
    assert metadata.calls == [1, 1]


def test_no_id_below_the_producer_id_floor_is_handed_out() -> None:
    metadata = Metadata(block_size=10)
    services = data_services(single_node_image(1, {}), metadata=metadata)
    assert call_handler(handle, services, 22, 4, init(4)).producer_id == 0
    metadata.image = MetadataImage(producer_id_floor=5)  # fenced inside the current block
    assert call_handler(handle, services, 22, 4, init(4)).producer_id == 5
    metadata.image = MetadataImage(producer_id_floor=25)  # past it: the rest of the block is dropped
    assert call_handler(handle, services, 22, 4, init(4)).producer_id == 25
    assert metadata.calls == [1, 1]


def test_epoch_bump_request_without_transactional_id_gets_a_new_id() -> None:
    services = data_services(single_node_image(1, {}), metadata=Metadata())
    first = call_handler(handle, services, 22, 4, init(4))
    again = call_handler(handle, services, 22, 4, init(4, producer_id=first.producer_id, epoch=0))
    assert again.error_code == ErrorCode.none and again.producer_id != first.producer_id and again.producer_epoch == 0


def test_transactional_ids_are_not_served_yet() -> None:
    services = data_services(single_node_image(1, {}), metadata=Metadata())
    answer = call_handler(handle, services, 22, 4, init(4, transactional_id="tx"))
    assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (ErrorCode.coordinator_not_available, -1, -1)


def test_allocation_failure_is_retriable() -> None:
    from kmirror.metadata.controller.result import ApiError
    from kmirror.metadata.controller_service import MetadataOperationError

    class Failing:
        image = MetadataImage()

        async def allocate_producer_ids(self, node_id: int) -> tuple[int, int]:
            raise MetadataOperationError(ApiError(ErrorCode.unknown_server_error, "no quorum"))

    services = data_services(single_node_image(1, {}), metadata=Failing())
    answer = call_handler(handle, services, 22, 4, init(4))
    assert answer.error_code == ErrorCode.coordinator_load_in_progress
