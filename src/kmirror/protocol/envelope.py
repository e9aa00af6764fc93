"""What an Envelope (key 58, KIP-590) carries besides the request: the client's principal,
serialized as Kafka's `DefaultKafkaPrincipalBuilder` does (a version-prefixed
`DefaultPrincipalData`), and its address."""

from __future__ import annotations

import io
import ipaddress
import struct
from dataclasses import dataclass

from kio.schema.default_principal_data.v0.data import DefaultPrincipalData
from kio.serial import entity_reader, entity_writer

_VERSION = struct.Struct(">h")
ENVELOPE = 58


@dataclass(frozen=True, slots=True)
class ForwardedPrincipal:
    principal_type: str
    name: str
    token_authenticated: bool = False


def encode_principal(principal: ForwardedPrincipal) -> bytes:
    buf = io.BytesIO()
    buf.write(_VERSION.pack(0))
    entity_writer(DefaultPrincipalData)(buf, DefaultPrincipalData(
        type_=principal.principal_type, name=principal.name, token_authenticated=principal.token_authenticated))
    return buf.getvalue()


def decode_principal(data: bytes) -> ForwardedPrincipal:
    """Raises ValueError on bytes that are not a principal of version 0."""
    if len(data) < _VERSION.size or _VERSION.unpack_from(data)[0] != 0:
        raise ValueError("not a version 0 DefaultPrincipalData")
    try:
        value, _ = entity_reader(DefaultPrincipalData)(data, _VERSION.size)
    except Exception as exc:  # kio raises a variety of decode errors on garbage
        raise ValueError(f"bad DefaultPrincipalData: {exc}") from None
    return ForwardedPrincipal(value.type_, value.name, bool(value.token_authenticated))


def host_address(host: str) -> bytes:
    """A client address as the Envelope carries it (4 or 16 bytes; empty if not an IP)."""
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:
        return b""


def host_text(address: bytes) -> str:
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return ""
