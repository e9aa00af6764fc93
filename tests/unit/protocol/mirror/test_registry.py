import pytest

from kmirror.protocol.mirror.registry import MIRROR_APIS, UnsupportedMirrorApi, entity_types, schemas

# KIP-1279 keys in the reference implementation's order (issue 4); 97 unused.
EXPECTED = {
    94: "CreateMirror", 95: "AddTopicsToMirror", 96: "RemoveTopicsFromMirror", 98: "ListMirrors",
    99: "DescribeMirrors", 100: "ReadMirrorStates", 101: "WriteMirrorStates", 102: "PauseMirrorTopics",
    103: "ResumeMirrorTopics", 104: "DeleteMirror", 105: "BumpLeaderEpochs",
}


def test_api_keys_names_and_versions() -> None:
    assert {k: v[0] for k, v in MIRROR_APIS.items()} == EXPECTED
    assert all((low, high) == (0, 0) for _, low, high in MIRROR_APIS.values())


@pytest.mark.parametrize("api_key", sorted(EXPECTED))
def test_entities_declare_their_api(api_key: int) -> None:
    request, response = schemas(api_key)(0)
    assert (request, response) == entity_types(api_key)
    assert request.__name__ == EXPECTED[api_key] + "Request"
    assert response.__name__ == EXPECTED[api_key] + "Response"
    for cls in (request, response):
        assert cls.__api_key__ == api_key and cls.__version__ == 0 and cls.__flexible__
    assert request.__header_schema__.__module__ == "kio.schema.request_header.v2.header"
    assert response.__header_schema__.__module__ == "kio.schema.response_header.v1.header"


def test_unknown_key_and_version_are_refused() -> None:
    with pytest.raises(UnsupportedMirrorApi):
        schemas(97)
    with pytest.raises(UnsupportedMirrorApi):
        schemas(94)(1)
