"""Client quotas in the metadata log: Kafka's validation of entities, keys and values, records
only for changes, the image's replay, and DescribeClientQuotas' filter semantics."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.client_quotas import (
    MatchType,
    QuotaAlteration,
    QuotaFilterComponent,
    alter_client_quotas,
    describe_client_quotas,
)
from kmirror.metadata.image import EMPTY_IMAGE, MetadataImage
from kmirror.metadata.records import ClientQuotaRecord, decode, encode


def _apply(image: MetadataImage, *alterations: QuotaAlteration) -> tuple[MetadataImage, list[ErrorCode]]:
    result = alter_client_quotas(image, alterations)
    assert result.response is not None
    return image.apply(result.records, image.offset + len(result.records)), [e.code for e in result.response]


def test_record_round_trips_with_default_entity() -> None:
    record = ClientQuotaRecord(((("client-id", None)), ("user", "alice")), "producer_byte_rate", 1024.0)
    assert decode(encode(record)) == record
    removal = ClientQuotaRecord((("ip", "10.0.0.1"),), "connection_creation_rate", remove=True)
    assert decode(encode(removal)) == removal


def test_alter_sets_changes_and_removes_and_the_image_follows() -> None:
    image, errors = _apply(EMPTY_IMAGE, QuotaAlteration((("user", "alice"), ("client-id", "app")),
                                                        (("producer_byte_rate", 1024.0), ("request_percentage", 25.5))))
    assert errors == [ErrorCode.none]
    entity = (("client-id", "app"), ("user", "alice"))  # sorted, whatever the request order
    assert dict(image.client_quotas[entity]) == {"producer_byte_rate": 1024.0, "request_percentage": 25.5}
    # an unchanged value writes no record; a removal of an absent key neither
    unchanged = alter_client_quotas(image, [QuotaAlteration(entity, (("producer_byte_rate", 1024.0),
                                                                     ("consumer_byte_rate", None)))])
    assert unchanged.records == [] and unchanged.response is not None
    image, _ = _apply(image, QuotaAlteration(entity, (("producer_byte_rate", None), ("request_percentage", None))))
    assert entity not in image.client_quotas
    image, _ = _apply(image, QuotaAlteration((("client-id", None),), (("consumer_byte_rate", 10.0),)))
    assert dict(image.client_quotas[(("client-id", None),)]) == {"consumer_byte_rate": 10.0}


def test_bad_entities_keys_and_values_get_invalid_request_and_write_nothing() -> None:
    image, _ = _apply(EMPTY_IMAGE, QuotaAlteration((("client-id", "app"),), (("producer_byte_rate", 5.0),)))
    cases = [
        ((("group", "g"),), (("producer_byte_rate", 1.0),), "Unhandled client quota entity type: group"),
        ((), (("producer_byte_rate", 1.0),), "Invalid empty client quota entity"),
        ((("user", "a"), ("user", "b")), (("producer_byte_rate", 1.0),), None),
        ((("user", ""),), (("producer_byte_rate", 1.0),), "Empty user not supported"),
        ((("ip", "1.2.3.4"), ("user", "u")), (("connection_creation_rate", 1.0),), None),
        ((("ip", "not an ip"),), (("connection_creation_rate", 1.0),), "not an ip is not a valid IP or resolvable host."),
        ((("ip", "1.2.3.4"),), (("producer_byte_rate", 1.0),), "Invalid configuration key producer_byte_rate"),
        ((("client-id", "app"),), (("producer_rate", 1.0),), "Invalid configuration key producer_rate"),
        ((("client-id", "app"),), (("producer_byte_rate", 1.5),), "Configuration producer_byte_rate must be a Long value"),
        ((("client-id", "app"),), (("producer_byte_rate", -1.0),), None),
        ((("client-id", "app"),), (("request_percentage", float("nan")),), None),
        ((("client-id", "app"),), (("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0)), None),
        ((("client-id", "app"),), (("consumer_byte_rate", 7.0), ("producer_byte_rate", -3.0)), None),
    ]
    for entity, ops, message in cases:
        result = alter_client_quotas(image, [QuotaAlteration(entity, ops)])
        assert result.records == [], (entity, ops)
        assert result.response is not None
        [error] = result.response
        assert error.code == ErrorCode.invalid_request, (entity, ops)
        if message is not None:
            assert error.message == message
    # one bad entity does not stop a good one in the same request
    result = alter_client_quotas(image, [QuotaAlteration((("group", "g"),), (("producer_byte_rate", 1.0),)),
                                         QuotaAlteration((("user", "u"),), (("producer_byte_rate", 1.0),))])
    assert result.response is not None
    assert [e.code for e in result.response] == [ErrorCode.invalid_request, ErrorCode.none]
    assert len(result.records) == 1


def test_validate_only_checks_without_records() -> None:
    result = alter_client_quotas(EMPTY_IMAGE, [QuotaAlteration((("user", "u"),), (("producer_byte_rate", 1.0),))],
                                 validate_only=True)
    assert result.records == [] and result.response is not None and result.response[0].code == ErrorCode.none


def _image_with_entities() -> MetadataImage:
    image = EMPTY_IMAGE
    for entity in [(("user", "alice"),), (("user", None),), (("client-id", "app"),), (("client-id", None),),
                   (("user", "alice"), ("client-id", "app")), (("ip", "1.2.3.4"),)]:
        key = "connection_creation_rate" if entity[0][0] == "ip" else "producer_byte_rate"
        image, errors = _apply(image, QuotaAlteration(entity, ((key, 1.0),)))
        assert errors == [ErrorCode.none]
    return image


def _described(image: MetadataImage, *components: tuple[str, int, str | None], strict: bool) -> set[tuple]:
    out = describe_client_quotas(image, [QuotaFilterComponent(*c) for c in components], strict)
    assert out.error.code == ErrorCode.none
    return {entity for entity, _ in out.entries}


def test_describe_filters_as_kafka() -> None:
    image = _image_with_entities()
    assert len(_described(image, strict=False)) == 6
    assert _described(image, strict=True) == set()
    assert _described(image, ("user", MatchType.EXACT, "alice"), strict=True) == {(("user", "alice"),)}
    assert _described(image, ("user", MatchType.EXACT, "alice"), strict=False) == {
        (("user", "alice"),), (("client-id", "app"), ("user", "alice"))}
    assert _described(image, ("user", MatchType.DEFAULT, None), strict=True) == {(("user", None),)}
    assert _described(image, ("client-id", MatchType.SPECIFIED, None), strict=True) == {
        (("client-id", "app"),), (("client-id", None),)}
    assert _described(image, ("client-id", MatchType.SPECIFIED, None), ("user", MatchType.SPECIFIED, None),
                      strict=True) == {(("client-id", "app"), ("user", "alice"))}


def test_describe_refuses_bad_filters() -> None:
    image = _image_with_entities()
    for components, code in [
        ([("group", MatchType.SPECIFIED, None)], ErrorCode.unsupported_version),
        ([("", MatchType.SPECIFIED, None)], ErrorCode.invalid_request),
        ([("user", MatchType.EXACT, None)], ErrorCode.invalid_request),
        ([("user", MatchType.DEFAULT, "x")], ErrorCode.invalid_request),
        ([("user", MatchType.SPECIFIED, "x")], ErrorCode.invalid_request),
        ([("user", 7, None)], ErrorCode.invalid_request),
        ([("user", MatchType.SPECIFIED, None), ("user", MatchType.DEFAULT, None)], ErrorCode.invalid_request),
        ([("ip", MatchType.SPECIFIED, None), ("client-id", MatchType.SPECIFIED, None)], ErrorCode.invalid_request),
    ]:
        out = describe_client_quotas(image, [QuotaFilterComponent(*c) for c in components], False)
        assert out.error.code == code, components
        assert out.entries == ()
