from __future__ import annotations

import pytest

from kmirror.protocol.envelope import (
    ForwardedPrincipal,
    decode_principal,
    encode_principal,
    host_address,
    host_text,
)


def test_principal_is_kafkas_version_prefixed_default_principal_data() -> None:
    principal = ForwardedPrincipal("User", "alice", token_authenticated=True)
    data = encode_principal(principal)
    assert data == b"\x00\x00\x05User\x06alice\x01\x00"  # version 0, compact strings, bool, no tags
    assert decode_principal(data) == principal
    for bad in (b"", b"\x00\x01" + data[2:], b"\x00\x00\xff"):
        with pytest.raises(ValueError):
            decode_principal(bad)


def test_client_addresses() -> None:
    assert host_address("127.0.0.1") == b"\x7f\x00\x00\x01" and host_text(b"\x7f\x00\x00\x01") == "127.0.0.1"
    assert host_text(host_address("::1")) == "::1"
    assert host_address("not-an-ip") == b"" and host_text(b"") == ""
