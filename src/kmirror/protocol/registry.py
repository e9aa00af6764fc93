"""The API registry: which API keys and versions this node implements, and their schemas.

ApiVersions advertises exactly the registered ranges. Schemas come from kio for the APIs of
Apache Kafka 4.2; an API kio does not know (the KIP-1279 RPCs, keys 94-105) registers its own
entity classes through `schemas=`, written in kio's dataclass style so kio's reader and
writer handle them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kio.index import load_request_schema, load_response_schema

SchemaLookup = Callable[[int], tuple[type[Any], type[Any]]]


def kio_schemas(api_key: int) -> SchemaLookup:
    def lookup(version: int) -> tuple[type[Any], type[Any]]:
        return load_request_schema(api_key, version), load_response_schema(api_key, version)

    return lookup


@dataclass(frozen=True)
class ApiSpec:
    api_key: int
    name: str
    min_version: int
    max_version: int
    handler: Callable[..., Any]
    schemas: SchemaLookup
    # Response header v0 regardless of flexibility (ApiVersions, KIP-511).
    response_header_v0: bool = False
    # Hidden APIs are served but not advertised (e.g. controller-only RPCs on a broker listener).
    advertised: bool = True
    _cache: dict[int, tuple[type[Any], type[Any]]] = field(default_factory=dict, compare=False, repr=False)

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def request_type(self, version: int) -> type[Any]:
        return self._types(version)[0]

    def response_type(self, version: int) -> type[Any]:
        return self._types(version)[1]

    def _types(self, version: int) -> tuple[type[Any], type[Any]]:
        types = self._cache.get(version)
        if types is None:
            types = self._cache[version] = self.schemas(version)
        return types


class DuplicateApi(Exception):
    pass


class ApiRegistry:
    def __init__(self) -> None:
        self._specs: dict[int, ApiSpec] = {}

    def register(self, spec: ApiSpec) -> None:
        """Adds `spec`; its schemas load at the first request of each version (loading the
        oldest and newest of every API at a node's start took 0.33 CPU-s, a third of the start;
        tests/unit/protocol/test_codec.py resolves every version's)."""
        if spec.api_key in self._specs:
            raise DuplicateApi(f"API key {spec.api_key} registered twice")
        self._specs[spec.api_key] = spec

    def get(self, api_key: int) -> ApiSpec | None:
        return self._specs.get(api_key)

    def __iter__(self) -> Iterator[ApiSpec]:
        return iter(sorted(self._specs.values(), key=lambda s: s.api_key))

    def __contains__(self, api_key: int) -> bool:
        return api_key in self._specs
