"""MIT Kerberos through the `gssapi` package (an optional dependency: `pip install gssapi`,
which builds against Debian's libkrb5-dev): the GSS-API security contexts SASL/GSSAPI runs
on (`security/gssapi.py`), a client's here and a broker's in `runtime/kerberos.py`.

Kerberos is configured as for any MIT program: `KRB5_CONFIG` (else /etc/krb5.conf) names the
realms and their KDCs. A client logging in from a keytab keeps its tickets in a cache in
memory of its own, one per principal and keytab, renewed from the keytab by the library.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from kmirror.security.client_config import KerberosClientSettings
from kmirror.security.gssapi import GssFailure


class KerberosUnavailable(RuntimeError):
    """The `gssapi` package is missing; `str()` says how to install it."""


def gssapi_module() -> ModuleType:
    try:
        return importlib.import_module("gssapi")
    except ImportError:
        raise KerberosUnavailable("SASL/GSSAPI needs the Python package gssapi "
                                  "(apt-get install libkrb5-dev; pip install gssapi)") from None


def _reason(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


class GssapiContext:
    """A `GssContext` over a `gssapi.SecurityContext`; every GSS error becomes a `GssFailure`
    (the package may keep an error of one call and raise it at the next, `complete` included)."""

    def __init__(self, context: Any) -> None:
        self._context = context

    def _call(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as exc:  # gssapi's GSSError and its subclasses
            raise GssFailure(_reason(exc)) from None

    @property
    def complete(self) -> bool:
        return bool(self._call(lambda: self._context.complete))

    def step(self, token: bytes | None) -> bytes | None:
        out = self._call(lambda: self._context.step(token))
        return None if out is None else bytes(out)

    def wrap(self, message: bytes) -> bytes:
        return bytes(self._call(lambda: self._context.wrap(message, False).message))

    def unwrap(self, message: bytes) -> bytes:
        return bytes(self._call(lambda: self._context.unwrap(message).message))

    def peer(self) -> str:
        accepting = self._context.usage == "accept"
        return str(self._call(lambda: self._context.initiator_name if accepting else self._context.target_name))


@functools.lru_cache(maxsize=32)
def _initiator_credentials(principal: str | None, keytab: str | None, ticket_cache: str | None) -> Any:
    gssapi = gssapi_module()
    name = None if principal is None else gssapi.Name(principal, gssapi.NameType.kerberos_principal)
    if keytab is not None:
        store = {"client_keytab": keytab, "ccache": f"MEMORY:kmirror-{abs(hash((principal, keytab)))}"}
    elif ticket_cache is not None:
        store = {"ccache": ticket_cache}
    else:
        return gssapi.Credentials(name=name, usage="initiate")
    return gssapi.Credentials(name=name, usage="initiate", store=store)


def initiator(settings: KerberosClientSettings, host: str) -> GssapiContext:
    """The client's context towards the broker at `host` (`<service>/<host>@REALM`)."""
    gssapi = gssapi_module()
    try:
        credentials = _initiator_credentials(settings.principal, settings.keytab, settings.ticket_cache)
        target = gssapi.Name(f"{settings.service_name}@{host}", gssapi.NameType.hostbased_service)
        return GssapiContext(gssapi.SecurityContext(name=target, creds=credentials, usage="initiate"))
    except KerberosUnavailable:
        raise
    except Exception as exc:
        raise GssFailure(_reason(exc)) from None
