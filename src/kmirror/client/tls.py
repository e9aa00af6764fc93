"""`ssl.SSLContext`s from the PEM settings (the edge: reads key, certificate and CA files).

Inline PEM keys and certificate chains (`ssl.keystore.key`, `ssl.keystore.certificate.chain`)
pass through a private temporary file, because `load_cert_chain` only reads files.
"""

from __future__ import annotations

import contextlib
import functools
import os
import ssl
import tempfile

from kmirror.security.client_config import TlsClientSettings
from kmirror.security.listener_config import TlsServerSettings

_VERIFY = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


class TlsSetupError(ValueError):
    """A PEM file or value cannot be used; `str()` says which and why."""


def _load_chain(ctx: ssl.SSLContext, location: str | None, chain_pem: str | None, key_pem: str | None,
                password: str | None) -> None:
    try:
        if location is not None:
            ctx.load_cert_chain(location, password=password)
            return
        if chain_pem is None or key_pem is None:
            return
        fd, path = tempfile.mkstemp(suffix=".pem")
        try:
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(key_pem.strip() + "\n" + chain_pem.strip() + "\n")
            ctx.load_cert_chain(path, password=password)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)
    except (OSError, ssl.SSLError) as exc:
        raise TlsSetupError(f"cannot load keystore {location or '(inline PEM)'}: {exc}") from None


def _load_trust(ctx: ssl.SSLContext, location: str | None, pem: str | None) -> None:
    try:
        if location is not None:
            ctx.load_verify_locations(cafile=location)
        if pem is not None:
            ctx.load_verify_locations(cadata=pem)
    except (OSError, ssl.SSLError) as exc:
        raise TlsSetupError(f"cannot load truststore {location or '(inline PEM)'}: {exc}") from None


def server_context(settings: TlsServerSettings) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(ctx, settings.keystore_location, settings.certificate_chain_pem, settings.key_pem,
                settings.key_password)
    _load_trust(ctx, settings.truststore_location, settings.truststore_pem)
    ctx.verify_mode = _VERIFY[settings.client_auth]
    return ctx


def client_context(settings: TlsClientSettings) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = settings.check_hostname
    if settings.ca_location is None and settings.ca_pem is None:
        ctx.load_default_certs()
    else:
        _load_trust(ctx, settings.ca_location, settings.ca_pem)
    _load_chain(ctx, settings.keystore_location, settings.certificate_chain_pem, settings.key_pem,
                settings.key_password)
    return ctx


@functools.lru_cache(maxsize=64)
def tls_context(settings: TlsClientSettings) -> ssl.SSLContext:
    """One context per distinct TLS setting (contexts are reusable across connections)."""
    return client_context(settings)
