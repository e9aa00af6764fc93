"""The KIP-1279 RPCs: API keys, names, version ranges and their schema lookups.

Keys follow the order of the public reference implementation (97 is unused). Every RPC has
only v0, flexible: request header v2, response header v1. A handler registers with
`@api(key, MIRROR_APIS[key][0], 0, 0, schemas=schemas(key))`.
"""

from types import ModuleType
from typing import Any

from kmirror.protocol.mirror import (
    add_topics_to_mirror,
    bump_leader_epochs,
    create_mirror,
    delete_mirror,
    describe_mirrors,
    list_mirrors,
    pause_mirror_topics,
    read_mirror_states,
    remove_topics_from_mirror,
    resume_mirror_topics,
    write_mirror_states,
)
from kmirror.protocol.registry import SchemaLookup

_MODULES: dict[int, tuple[str, ModuleType]] = {
    94: ("CreateMirror", create_mirror),
    95: ("AddTopicsToMirror", add_topics_to_mirror),
    96: ("RemoveTopicsFromMirror", remove_topics_from_mirror),
    98: ("ListMirrors", list_mirrors),
    99: ("DescribeMirrors", describe_mirrors),
    100: ("ReadMirrorStates", read_mirror_states),
    101: ("WriteMirrorStates", write_mirror_states),
    102: ("PauseMirrorTopics", pause_mirror_topics),
    103: ("ResumeMirrorTopics", resume_mirror_topics),
    104: ("DeleteMirror", delete_mirror),
    105: ("BumpLeaderEpochs", bump_leader_epochs),
}

# api key -> (name, min version, max version)
MIRROR_APIS: dict[int, tuple[str, int, int]] = {key: (name, 0, 0) for key, (name, _) in _MODULES.items()}

# Inter-broker / broker-to-controller RPCs (not for operators' clients).
INTERNAL_APIS: frozenset[int] = frozenset({100, 101, 105})


class UnsupportedMirrorApi(KeyError):
    pass


def entity_types(api_key: int) -> tuple[type[Any], type[Any]]:
    """(RequestType, ResponseType) of a mirror RPC's v0."""
    try:
        name, module = _MODULES[api_key]
    except KeyError:
        raise UnsupportedMirrorApi(f"API key {api_key} is not a KIP-1279 RPC") from None
    request: type[Any] = getattr(module, f"{name}Request")
    response: type[Any] = getattr(module, f"{name}Response")
    return request, response


def schemas(api_key: int) -> SchemaLookup:
    """The `SchemaLookup` of a mirror RPC (kmirror.protocol.registry's shape)."""
    types = entity_types(api_key)
    _, low, high = MIRROR_APIS[api_key]

    def lookup(version: int) -> tuple[type[Any], type[Any]]:
        if not low <= version <= high:
            raise UnsupportedMirrorApi(f"{MIRROR_APIS[api_key][0]} has no version {version}")
        return types

    return lookup
