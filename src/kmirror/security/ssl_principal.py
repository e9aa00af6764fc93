"""The principal of a TLS client certificate, as Kafka's `DefaultKafkaPrincipalBuilder` makes it.

A client that presents a certificate on an SSL listener (`ssl.client.auth=required` or
`requested`) is `User:<name>`, where the name is the certificate subject's distinguished name
in RFC 2253 form, as Java's `X500Principal.getName()` writes it (`CN=alice,OU=Eng,O=Acme\\,
Inc,C=US`: the last RDN of the certificate first, specials escaped), mapped by
`ssl.principal.mapping.rules` (Kafka's `SslPrincipalMapper`):

- `DEFAULT`: the distinguished name itself;
- `RULE:pattern/replacement/[L|U]`: when the regex matches the whole name, the name becomes
  the replacement (`$1`... name the groups), lower- or upper-cased with `L` / `U`.

The rules are tried in order; a name no rule matches gets no principal, and the connection is
refused, as Kafka fails its authentication. Attribute types Java names are written by name
(CN, C, L, ST, O, OU, STREET, DC, UID); others by dotted OID.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# getpeercert()'s attribute names -> the RFC 2253 keywords Java's X500Principal writes
_KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}
_OIDS = {"emailAddress": "1.2.840.113549.1.9.1", "serialNumber": "2.5.4.5", "title": "2.5.4.12",
         "givenName": "2.5.4.42", "surname": "2.5.4.4", "initials": "2.5.4.43", "pseudonym": "2.5.4.65",
         "generationQualifier": "2.5.4.44", "dnQualifier": "2.5.4.46", "postalCode": "2.5.4.17"}

Subject = Sequence[Sequence[tuple[str, str]]]  # ssl.SSLSocket.getpeercert()["subject"]


class PrincipalMappingError(ValueError):
    """`ssl.principal.mapping.rules` that do not parse, or a name no rule matches."""


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in ',+"\\<>;' else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def distinguished_name(subject: Subject) -> str:
    """RFC 2253, as Java's `X500Principal.getName()`: RDNs last first, an RDN's values joined by `+`."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_KEYWORDS.get(name) or _OIDS.get(name, name)}={_escape(value)}"
                             for name, value in rdn))
    return ",".join(rdns)


@dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    template: str = ""
    case: str = ""  # "L", "U" or ""

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        result = match.expand(self.template)
        return result.lower() if self.case == "L" else result.upper() if self.case == "U" else result


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?)[^,]*?)\s*(?:,\s*|$)")


def _template(java_replacement: str) -> str:
    """A Java replacement (`$1`, `\\x` for a literal x) as a Python `expand` template."""
    out, i = [], 0
    while i < len(java_replacement):
        c = java_replacement[i]
        if c == "\\" and i + 1 < len(java_replacement):
            out.append("\\\\" if java_replacement[i + 1] == "\\" else java_replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < len(java_replacement) and java_replacement[i + 1].isdigit():
            j = i + 1
            while j < len(java_replacement) and java_replacement[j].isdigit():
                j += 1
            out.append(f"\\g<{java_replacement[i + 1:j]}>")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_rules(text: str) -> tuple[Rule, ...]:
    """Kafka's `ssl.principal.mapping.rules`: comma-separated `DEFAULT` and `RULE:...` entries."""
    text = text.strip()
    if not text:
        return (Rule(None),)
    rules, pos = [], 0
    while pos < len(text):
        match = _RULE.match(text, pos)
        if match is None or match.end() == pos:
            raise PrincipalMappingError(f"Invalid rule: {text[pos:]}")
        if match.group(1):
            rules.append(Rule(None))
        else:
            try:
                pattern = re.compile(match.group(2))
            except re.error as exc:
                raise PrincipalMappingError(f"Invalid rule: {match.group(0).strip()} ({exc})") from None
            rules.append(Rule(pattern, _template(match.group(3)), match.group(4)))
        pos = match.end()
    return tuple(rules)


def certificate_principal(peercert: Mapping[str, object] | None, rules: Sequence[Rule] | None) -> str | None:
    """The principal's name of a TLS client's certificate (`getpeercert()`), None when the
    listener is not TLS (`rules` None) or the client presented none; raises
    `PrincipalMappingError` when no rule applies."""
    if rules is None or not peercert:
        return None
    subject = peercert.get("subject", ())
    assert isinstance(subject, tuple)
    return principal_name(subject, rules)


def principal_name(subject: Subject, rules: Sequence[Rule]) -> str:
    """The principal's name (without `User:`) of a certificate subject; raises
    `PrincipalMappingError` when no rule applies (Kafka's `NoMatchingRule`)."""
    name = distinguished_name(subject)
    for rule in rules:
        mapped = rule.apply(name)
        if mapped is not None:
            return mapped
    raise PrincipalMappingError(f"No rules apply to {name}, rules {[r.pattern.pattern for r in rules if r.pattern]}")
