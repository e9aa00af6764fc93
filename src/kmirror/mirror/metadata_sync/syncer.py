"""The shape of a per-mirror metadata syncer (consumer group offsets, ACLs): each refresh it
visits every mirror this broker coordinates (`coordination.coordinated_mirrors`) whose
config parses and whose source is not halted (another cluster id than the one recorded at
CreateMirror: nothing is read from it then)."""

from __future__ import annotations

from collections.abc import Callable

from kmirror.config.mirror import InvalidMirrorConfig, MirrorConfig
from kmirror.metadata.image import MetadataImage
from kmirror.mirror.metadata_sync.admins import SyncAdmins
from kmirror.mirror.metadata_sync.coordination import coordinated_mirrors
from kmirror.mirror.sync_errors import MirrorSyncErrors


class CoordinatedMirrorSync:
    def __init__(self, broker_id: int, image: Callable[[], MetadataImage | None], admins: SyncAdmins,
                 sync_errors: MirrorSyncErrors, is_halted: Callable[[str], bool] = lambda mirror_name: False) -> None:
        self.broker_id = broker_id
        self.is_halted = is_halted
        self.image = image
        self.admins = admins
        self.sync_errors = sync_errors

    async def run_once(self) -> None:
        image = self.image()
        if image is not None:
            for mirror in coordinated_mirrors(image, self.broker_id):
                config = mirror.parsed()
                if self.is_halted(mirror.name) or isinstance(config, InvalidMirrorConfig):
                    continue
                await self.sync(image, mirror.name, config)
        await self.admins.close_retired()

    async def sync(self, image: MetadataImage, mirror_name: str, config: MirrorConfig) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        await self.admins.close()
