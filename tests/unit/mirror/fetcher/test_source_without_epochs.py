"""A source broker without OffsetsForLeaderEpoch (Tansu): the source endpoint never sends it
and answers every epoch as undefined, so the fetch engine truncates to the local high
watermark (Kafka's fetcher towards a leader that lacks the API)."""

import asyncio
import uuid

from kmirror.mirror.fetcher.source_endpoint import UNDEFINED_EPOCH_END_OFFSET, SourceClusterEndPoint
from kmirror.replication.fetcher.engine import EpochQuery
from kmirror.testing.fake_broker import api_versions_v0_answer, read_frame, write_frame
from kmirror.types import TopicPartition

SOURCE_APIS = {0: (0, 11), 1: (0, 12), 2: (0, 7), 3: (0, 12), 18: (0, 4)}  # no 23


def test_source_without_offsets_for_leader_epoch_answers_undefined_epochs() -> None:
    api_keys_received: list[int] = []

    async def source_broker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while (request := await read_frame(reader)) is not None:
            api_keys_received.append(int.from_bytes(request[0:2], "big"))
            write_frame(writer, api_versions_v0_answer(request[4:8], SOURCE_APIS))
            await writer.drain()

    async def scenario() -> dict:
        server = await asyncio.start_server(source_broker, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        endpoint = SourceClusterEndPoint("127.0.0.1", port, client_id="mirror")
        try:
            tps = [TopicPartition("orders", 0), TopicPartition("orders", 1)]
            return await endpoint.fetch_epoch_end_offsets(
                [EpochQuery(tp, uuid.UUID(int=7), -1, 3) for tp in tps])
        finally:
            await endpoint.close()
            server.close()

    results = asyncio.run(scenario())
    assert results == {TopicPartition("orders", 0): UNDEFINED_EPOCH_END_OFFSET,
                       TopicPartition("orders", 1): UNDEFINED_EPOCH_END_OFFSET}
    assert api_keys_received == [18]  # ApiVersions only, never OffsetsForLeaderEpoch (23)
