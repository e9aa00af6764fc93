"""Requests to other brokers of this cluster over their inter-broker listener.

`ListenerBrokerSender` sends a request entity to broker `node_id` and returns its response
entity (raises if the broker cannot be reached). It keeps one `kmirror.client` connection per
broker, found in the metadata image, and replaces a connection that failed. The mirror
coordinator routes ReadMirrorStates / WriteMirrorStates through it; the transaction
coordinator its WriteTxnMarkers and verification requests; share partition leaders their
ReadShareGroupState / WriteShareGroupState.
"""

from __future__ import annotations

from typing import overload

from kio.schema.add_partitions_to_txn.v4 import request as add_partitions_to_txn_request
from kio.schema.add_partitions_to_txn.v4 import response as add_partitions_to_txn_response
from kio.schema.read_share_group_state.v0 import request as read_share_state_request
from kio.schema.read_share_group_state.v0 import response as read_share_state_response
from kio.schema.write_share_group_state.v0 import request as write_share_state_request
from kio.schema.write_share_group_state.v0 import response as write_share_state_response
from kio.schema.write_txn_markers.v1 import request as write_txn_markers_request
from kio.schema.write_txn_markers.v1 import response as write_txn_markers_response

from kmirror.client.connection import BrokerConnection
from kmirror.metadata.broker_service import BrokerMetadataService
from kmirror.metadata.controller_service import MetadataService
from kmirror.protocol.mirror import read_mirror_states as rms
from kmirror.protocol.mirror import write_mirror_states as wms


class ListenerBrokerSender:
    """A sender over `kmirror.client` connections to each broker's listener (the
    inter-broker one), kept open and replaced when they fail."""

    def __init__(self, metadata: MetadataService | BrokerMetadataService, listener_name: str | None,
                 client_id: str) -> None:
        self.metadata = metadata
        self.listener_name = listener_name
        self.client_id = client_id
        self._connections: dict[int, BrokerConnection] = {}

    # The requests brokers send each other this way, each with the response of its version.
    @overload
    async def __call__(self, node_id: int, request: rms.ReadMirrorStatesRequest) -> rms.ReadMirrorStatesResponse: ...

    @overload
    async def __call__(self, node_id: int, request: wms.WriteMirrorStatesRequest) -> wms.WriteMirrorStatesResponse: ...

    @overload
    async def __call__(self, node_id: int, request: write_txn_markers_request.WriteTxnMarkersRequest,
                       ) -> write_txn_markers_response.WriteTxnMarkersResponse: ...

    @overload
    async def __call__(self, node_id: int, request: add_partitions_to_txn_request.AddPartitionsToTxnRequest,
                       ) -> add_partitions_to_txn_response.AddPartitionsToTxnResponse: ...

    @overload
    async def __call__(self, node_id: int, request: read_share_state_request.ReadShareGroupStateRequest,
                       ) -> read_share_state_response.ReadShareGroupStateResponse: ...

    @overload
    async def __call__(self, node_id: int, request: write_share_state_request.WriteShareGroupStateRequest,
                       ) -> write_share_state_response.WriteShareGroupStateResponse: ...

    async def __call__(self, node_id: int, request: object) -> object:
        conn = self._connections.get(node_id)
        if conn is None or not conn.connected:
            broker = self.metadata.image.brokers.get(node_id)
            endpoint = None if broker is None or broker.fenced else broker.endpoint(self.listener_name)
            if endpoint is None:
                raise ConnectionError(f"broker {node_id} has no endpoint for {self.listener_name}")
            conn = BrokerConnection(endpoint.host, endpoint.port, client_id=self.client_id)
            await conn.connect()
            self._connections[node_id] = conn
        try:
            return await conn.send(request)
        except Exception:
            self._connections.pop(node_id, None)
            await conn.close()
            raise

    async def close(self) -> None:
        for conn in self._connections.values():
            await conn.close()
        self._connections.clear()
