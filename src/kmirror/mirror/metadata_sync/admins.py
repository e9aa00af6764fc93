"""The Admin clients metadata sync works through: one per mirror for its source cluster
(the mirror's `bootstrap.servers` and `security.*` / `sasl.*` / `ssl.*` configs, replaced
when they change) and one for the destination cluster (this broker's own inter-broker
listener, as the brokers' other inter-broker clients, so a write takes the same route as a
client's: FindCoordinator, the group coordinator, the controller).

Creating an Admin does no I/O: each connects on its first request.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from kmirror.client.admin import Admin
from kmirror.client.cluster import Cluster
from kmirror.config.mirror import MirrorConfig
from kmirror.metadata.image import MetadataImage

AdminFactory = Callable[[str, str, MirrorConfig | None], Admin]
"""(bootstrap servers, client id, the mirror's config or None for the destination) -> Admin."""


def client_admin(bootstrap: str, client_id: str, config: MirrorConfig | None, *,
                 request_timeout_ms: int = 30_000) -> Admin:
    """`request_timeout_ms`: the broker's `request.timeout.ms` (KIP-1279), for the source."""
    if config is None:
        return Admin(Cluster(bootstrap, client_id=client_id))
    return Admin(Cluster(bootstrap, client_id=client_id, security=config.source_security,
                         request_timeout_ms=request_timeout_ms))


class SyncAdmins:
    def __init__(self, broker_id: int, image: Callable[[], MetadataImage | None], listener_name: str | None,
                 purpose: str, factory: AdminFactory = client_admin) -> None:
        self.broker_id = broker_id
        self.image = image
        self.listener_name = listener_name
        self.purpose = purpose
        self.factory = factory
        self._sources: dict[str, tuple[tuple[tuple[str, str], ...], Admin]] = {}
        """mirror -> (its source connection configs, the Admin connected with them)."""
        self._destination: tuple[str, Admin] | None = None
        self._closing: list[Admin] = []

    def source(self, mirror_name: str, config: MirrorConfig) -> Admin:
        identity = tuple(sorted(config.source_connection.items()))
        current = self._sources.get(mirror_name)
        if current is not None and current[0] == identity:
            return current[1]
        if current is not None:
            self._retire(current[1])
        admin = self.factory(",".join(config.bootstrap_servers),
                             f"broker-{self.broker_id}-mirror-{mirror_name}-{self.purpose}", config)
        self._sources[mirror_name] = (identity, admin)
        return admin

    def destination(self) -> Admin | None:
        """None while this broker has no registered endpoint."""
        image = self.image()
        broker = image.brokers.get(self.broker_id) if image is not None else None
        endpoint = broker.endpoint(self.listener_name) if broker is not None else None
        if endpoint is None:
            return None
        bootstrap = f"{endpoint.host}:{endpoint.port}"
        if self._destination is not None and self._destination[0] == bootstrap:
            return self._destination[1]
        if self._destination is not None:
            self._retire(self._destination[1])
        admin = self.factory(bootstrap, f"broker-{self.broker_id}-{self.purpose}", None)
        self._destination = (bootstrap, admin)
        return admin

    def _retire(self, admin: Admin) -> None:
        self._closing.append(admin)

    async def close_retired(self) -> None:
        closing, self._closing = self._closing, []
        for admin in closing:
            with contextlib.suppress(Exception):
                await admin.close()

    async def close(self) -> None:
        admins = [a for _, a in self._sources.values()]
        if self._destination is not None:
            admins.append(self._destination[1])
        self._sources, self._destination = {}, None
        await self.close_retired()
        for admin in admins:
            with contextlib.suppress(Exception):
                await admin.close()
