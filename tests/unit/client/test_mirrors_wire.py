"""Admin mirror methods over a real listener: the server advertises and serves KIP-1279 keys
with the mirror registry's schemas, the client negotiates and speaks them on the wire."""

import asyncio
import datetime
import types
from typing import Any

import pytest

from kmirror.broker.api import build_registry, load_handlers
from kmirror.client.admin import Admin
from kmirror.client.connection import BrokerConnection
from kmirror.client.errors import KafkaError
from kmirror.protocol.mirror import create_mirror, list_mirrors
from kmirror.protocol.mirror.registry import MIRROR_APIS, schemas
from kmirror.protocol.registry import ApiSpec
from kmirror.runtime.server import KafkaServer

ZERO = datetime.timedelta(0)


def create_mirror_handler(services: Any, ctx: Any, request: create_mirror.CreateMirrorRequest) -> Any:
    services.created.append((request.mirror_name, {c.name: c.value for c in request.config}))
    code = 138 if request.mirror_name == "taken" else 0  # a KIP code kio's ErrorCode does not know
    return create_mirror.CreateMirrorResponse(throttle_time=ZERO, error_code=code, error_message=None)  # type: ignore[arg-type]


def list_mirrors_handler(services: Any, ctx: Any, request: Any) -> Any:
    return list_mirrors.ListMirrorsResponse(throttle_time=ZERO, error_code=0, mirrors=tuple(  # type: ignore[arg-type]
        list_mirrors.ListedMirror(mirror_name=name, source_bootstrap=cfg["bootstrap.servers"], topic_count=0)
        for name, cfg in services.created))


class OneConnection:
    def __init__(self, conn: BrokerConnection) -> None:
        self.conn = conn

    async def any_connection(self) -> BrokerConnection:
        return self.conn

    async def controller_connection(self) -> BrokerConnection:
        return self.conn


def test_create_and_list_mirrors_over_the_wire() -> None:
    async def scenario() -> None:
        # the broker's own mirror handlers are replaced by the fakes below
        registry = build_registry([d for d in load_handlers() if d.api_key not in MIRROR_APIS])
        for key, handler in ((94, create_mirror_handler), (98, list_mirrors_handler)):
            name, low, high = MIRROR_APIS[key]
            registry.register(ApiSpec(key, name, low, high, handler, schemas(key)))
        services = types.SimpleNamespace(registry=registry, metadata=None, quotas=None, created=[])
        server = KafkaServer(registry, services)
        port = await server.start("127.0.0.1", 0)
        try:
            conn = BrokerConnection("127.0.0.1", port)
            await conn.connect()
            assert conn.api_versions[94] == (0, 0) and 95 not in conn.api_versions
            admin = Admin(OneConnection(conn))  # type: ignore[arg-type]  # no Metadata handler here
            await admin.create_mirror("my-mirror", {"bootstrap.servers": "localhost:9092"})
            assert services.created == [("my-mirror", {"bootstrap.servers": "localhost:9092"})]
            listed = await admin.list_mirrors()
            assert [(m.name, m.source_bootstrap, m.topic_count) for m in listed] == [
                ("my-mirror", "localhost:9092", 0)]
            with pytest.raises(KafkaError, match="TOPIC_ALREADY_IN_MIRROR"):
                await admin.create_mirror("taken", {"bootstrap.servers": "s:1"})
            with pytest.raises(KafkaError, match="UNSUPPORTED_VERSION: 127.0.0.1:.* does not support AddTopicsToMirror"):
                await admin.add_topics_to_mirror("my-mirror", ["t"])
            await conn.close()
        finally:
            await server.stop()

    asyncio.run(scenario())
