"""Test certificates made with the `openssl` CLI: a CA and a server certificate it signs.

The server certificate names `localhost` and `127.0.0.1` (subjectAltName), so clients that
verify host names (`ssl.endpoint.identification.algorithm=https`) accept it on 127.0.0.1.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class GeneratedCertificates:
    ca_pem: Path  # the CA certificate (truststore)
    server_pem: Path  # server key + certificate in one file (keystore)
    server_cert: Path
    server_key: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def make_certificates(directory: Path, common_name: str = "localhost") -> GeneratedCertificates:
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", "2", "-subj", "/CN=kmirror-test-ca", cwd=directory)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr",
             "-subj", f"/CN={common_name}", cwd=directory)
    (directory / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.crt", "-days", "2", "-extfile", "san.ext", cwd=directory)
    combined = directory / "server.pem"
    combined.write_text((directory / "server.key").read_text() + (directory / "server.crt").read_text())
    return GeneratedCertificates(directory / "ca.pem", combined, directory / "server.crt", directory / "server.key")


def make_client_certificate(certs: GeneratedCertificates, name: str, subject: str) -> tuple[Path, Path]:
    """A client certificate for `subject` (openssl form, `/CN=alice/O=Acme`) signed by the CA of
    `certs`: (certificate path, key path), for a listener with `ssl.client.auth=required`."""
    directory = certs.ca_pem.parent
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject,
             cwd=directory)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", f"{name}.crt", "-days", "2", cwd=directory)
    return directory / f"{name}.crt", directory / f"{name}.key"
