"""ApiVersions (key 18): advertises what the registry serves (KIP-511 response header v0),
except Fetch v19 (KIP-1279's MirrorLeaderEpoch), advertised only while `mirror.version` >= 1,
as Kafka gates versions behind feature levels: until then the highest Fetch is Kafka 4.2's v18."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.metadata.mirrors import mirroring_enabled
from kmirror.protocol.entities import build, nested
from kmirror.protocol.registry import ApiRegistry

FETCH_KEY, FETCH_MAX_WITHOUT_MIRRORING = 1, 18

# Feature levels this node can run (KRaft `SupportedFeatureKey`).
SUPPORTED_FEATURES: dict[str, tuple[int, int]] = {"metadata.version": (1, 27), "mirror.version": (0, 1)}


def unsupported_version_response(registry: ApiRegistry) -> ApiVersionsResponseV0:
    """The v0 body Kafka sends when the client's ApiVersions version is too new (error 35)."""
    return ApiVersionsResponseV0(
        error_code=ErrorCode.unsupported_version,
        api_keys=tuple(
            ApiVersionV0(api_key=i16(s.api_key), min_version=i16(s.min_version),
                         max_version=i16(advertised_max_version(s.api_key, s.max_version, None)))
            for s in registry
            if s.advertised
        ),
    )


@api(18, "ApiVersions", 0, 4, response_header_v0=True, planes=("broker", "controller"))
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    ApiVersion = nested(rt, "ApiVersion")
    image = services.metadata.image if services.metadata is not None else None
    keys = tuple(
        ApiVersion(api_key=i16(s.api_key), min_version=i16(s.min_version),
                   max_version=i16(advertised_max_version(s.api_key, s.max_version, image)))
        for s in services.registry
        if s.advertised
    )
    extra: dict[str, Any] = {}
    if ctx.api_version >= 3:
        Supported = nested(rt, "SupportedFeatureKey")
        Finalized = nested(rt, "FinalizedFeatureKey")
        extra["supported_features"] = tuple(
            Supported(name=n, min_version=i16(lo), max_version=i16(hi)) for n, (lo, hi) in SUPPORTED_FEATURES.items()
        )
        features, epoch = _finalized_features(services)
        extra["finalized_features_epoch"] = epoch
        extra["finalized_features"] = tuple(
            Finalized(name=n, max_version_level=i16(v), min_version_level=i16(v)) for n, v in features.items() if v > 0
        )
    return build(rt, error_code=ErrorCode.none, api_keys=keys, throttle_time=_zero_ms(), **extra)


def advertised_max_version(api_key: int, served_max_version: int, image: Any) -> int:
    if api_key == FETCH_KEY and (image is None or not mirroring_enabled(image)):
        return min(served_max_version, FETCH_MAX_WITHOUT_MIRRORING)
    return served_max_version


def _finalized_features(services: BrokerServices) -> tuple[dict[str, int], int]:
    metadata = services.metadata
    if metadata is None:
        return {}, -1
    image = metadata.image
    return dict(image.features), image.offset


def _zero_ms() -> Any:
    return datetime.timedelta(0)
