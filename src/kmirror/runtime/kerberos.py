"""A SASL listener's Kerberos side: its acceptor credentials, read once from the keytab of the
JAAS config when the listener opens (a keytab that is missing, unreadable or without the
principal refuses the node's start in one line), one GSS-API context per authentication, and
the principal-to-user mapping with the realm of the node's Kerberos configuration.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from kmirror.client.kerberos import GssapiContext, KerberosUnavailable, gssapi_module
from kmirror.security.gssapi import GssapiServer
from kmirror.security.kerberos_name import KerberosName, parse_rules, short_name
from kmirror.security.listener_config import KerberosServerSettings


class KerberosSetupError(Exception):
    """A GSSAPI listener cannot take its credentials; `str()` says why in one line."""


@functools.lru_cache(maxsize=8)
def _acceptor_credentials(principal: str, keytab: str) -> object:
    gssapi = gssapi_module()
    name = gssapi.Name(principal, gssapi.NameType.kerberos_principal)
    return gssapi.Credentials(name=name, usage="accept", store={"keytab": keytab})


def acceptor_credentials(settings: KerberosServerSettings) -> object:
    try:
        return _acceptor_credentials(settings.principal, settings.keytab)
    except KerberosUnavailable as exc:
        raise KerberosSetupError(str(exc)) from None
    except Exception as exc:  # gssapi's GSSError: no keytab, no key for the principal
        reason = " ".join(str(exc).split())
        raise KerberosSetupError(f"cannot read the key of {settings.principal} from keytab {settings.keytab}: "
                                 f"{reason}") from None


@functools.lru_cache(maxsize=1)
def default_realm() -> str | None:
    """The default realm of the Kerberos configuration (`KRB5_CONFIG`, else /etc/krb5.conf)."""
    gssapi = gssapi_module()
    try:
        name = gssapi.Name("kmirror", gssapi.NameType.user).canonicalize(gssapi.MechType.kerberos)
    except Exception:
        return None
    return KerberosName.parse(str(name)).realm


@functools.lru_cache(maxsize=8)
def short_namer(settings: KerberosServerSettings) -> Callable[[str], str]:
    """The listener's `sasl.kerberos.principal.to.local.rules`, parsed once."""
    realm = default_realm()
    rules = parse_rules(settings.principal_to_local_rules, realm)
    return lambda principal: short_name(KerberosName.parse(principal), rules, realm)


def gssapi_server(settings: KerberosServerSettings) -> GssapiServer:
    """The server side of one GSSAPI authentication."""
    gssapi = gssapi_module()
    context = gssapi.SecurityContext(creds=acceptor_credentials(settings), usage="accept")
    return GssapiServer(GssapiContext(context), short_namer(settings))
