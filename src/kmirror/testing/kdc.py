"""A Kerberos KDC of its own for tests (Kafka's `MiniKdc`): MIT krb5's `krb5kdc` in a fresh
directory, one realm, listening on one loopback TCP port, with principals and keytabs made by
`kadmin.local`.

`Kdc.env` is the environment a process needs to use it (`KRB5_CONFIG`); a broker or a client
started with it finds the realm's KDC there and nowhere else. Host names are taken as given
(`dns_canonicalize_hostname` and `rdns` off): a broker at 127.0.0.1 is `kafka/127.0.0.1`.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from kmirror.testing.processes import free_port_block

REALM = "KMIRROR.TEST"
TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")


class KdcUnavailable(RuntimeError):
    """MIT Kerberos' KDC programs are not installed (`apt-get install krb5-kdc krb5-user`)."""


def _tool(name: str) -> str:
    for directory in ("", "/usr/sbin", "/usr/local/sbin", "/sbin"):
        path = shutil.which(name) if not directory else os.path.join(directory, name)
        if path and os.access(path, os.X_OK):
            return path
    raise KdcUnavailable(f"{name} not found: install Debian's krb5-kdc and krb5-user packages")


class Kdc:
    def __init__(self, directory: Path, realm: str = REALM) -> None:
        self.dir = directory
        self.realm = realm
        self.port = free_port_block(1)
        self._proc: subprocess.Popen[bytes] | None = None
        self.krb5_conf = directory / "krb5.conf"
        self.env = {**os.environ, "KRB5_CONFIG": str(self.krb5_conf),
                    "KRB5_KDC_PROFILE": str(directory / "kdc.conf"),
                    "KRB5CCNAME": f"FILE:{directory / 'default.ccache'}"}

    def start(self) -> Kdc:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f" default_realm = {self.realm}\n"
            " dns_lookup_realm = false\n dns_lookup_kdc = false\n"
            " dns_canonicalize_hostname = false\n rdns = false\n"
            " udp_preference_limit = 1\n ticket_lifetime = 24h\n forwardable = true\n"
            "[realms]\n"
            f" {self.realm} = {{\n  kdc = 127.0.0.1:{self.port}\n }}\n")
        (self.dir / "kdc.conf").write_text(
            "[kdcdefaults]\n"
            f" kdc_listen = 127.0.0.1:{self.port}\n kdc_tcp_listen = 127.0.0.1:{self.port}\n"
            "[realms]\n"
            f" {self.realm} = {{\n"
            f"  database_name = {self.dir / 'principal'}\n"
            f"  key_stash_file = {self.dir / 'stash'}\n"
            f"  acl_file = {self.dir / 'kadm5.acl'}\n"
            f"  kdc_listen = 127.0.0.1:{self.port}\n  kdc_tcp_listen = 127.0.0.1:{self.port}\n"
            "  max_life = 24h\n  max_renewable_life = 7d\n"
            " }\n"
            "[logging]\n"
            f" kdc = FILE:{self.dir / 'kdc.log'}\n")
        (self.dir / "kadm5.acl").write_text("")
        self._run(_tool("kdb5_util"), "create", "-s", "-r", self.realm, "-P", "kdc-master-key")
        self._proc = subprocess.Popen([_tool("krb5kdc"), "-n", "-r", self.realm], env=self.env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"krb5kdc exited: {self._proc.stderr.read().decode() if self._proc.stderr else ''}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"krb5kdc not listening on {self.port}")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(10)

    def __enter__(self) -> Kdc:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def principal(self, name: str) -> str:
        return f"{name}@{self.realm}"

    def add_principal(self, name: str, keytab: Path | None = None, password: str | None = None) -> Path | None:
        """Create `name` (in the realm): with `password`, or a random key written to `keytab`."""
        key = ["-pw", password] if password is not None else ["-randkey"]
        self._run(_tool("kadmin.local"), "-r", self.realm, "-q", " ".join(["addprinc", *key, name]))
        if keytab is not None:
            self._run(_tool("kadmin.local"), "-r", self.realm, "-q", f"ktadd -k {keytab} -norandkey {name}")
        return keytab

    def kinit(self, principal: str, keytab: Path, ccache: Path) -> None:
        """A ticket cache at `ccache` for `principal`, from its keytab."""
        self._run(_tool("kinit"), "-k", "-t", str(keytab), "-c", f"FILE:{ccache}", principal)

    def _run(self, *args: str) -> None:
        out = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:2])} failed: {out.stderr.strip() or out.stdout.strip()}")
