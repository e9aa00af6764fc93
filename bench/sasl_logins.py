"""SASL logins a node serves, per mechanism, against PLAINTEXT connections measured in the same
run: the cost of a reconnect storm (after a failover every client connects and logs in again).

One node; its SASL_PLAINTEXT listener enables PLAIN, SCRAM-SHA-256 (4096 iterations), GSSAPI
(a KDC of its own, `kmirror.testing.kdc`; skipped when MIT Kerberos is missing) and OAUTHBEARER
(signed RS256 JWTs checked against an identity provider's JWK Set, `kmirror.testing.oidc`).
For each case, `--concurrency` tasks of kmirror's client open a connection (ApiVersions, then
the SASL exchange), and close it, for `--seconds`. The node's CPU per login is read from
/proc (the measure the client's own work and the machine's other load distort least); logins/s
and the latencies are the client's, so they include its side (SCRAM's PBKDF2, a Kerberos
service ticket, both in C).

    .venv/bin/python bench/sasl_logins.py [--seconds 5] [--concurrency 8] [--out docs/benchmarks.md]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from line_plot import report, save_bar_pair

from kmirror.client.connection import BrokerConnection
from kmirror.security.client_config import ClientSecurity, client_security
from kmirror.testing.kdc import Kdc, KdcUnavailable
from kmirror.testing.oidc import AUDIENCE, IdentityProvider
from kmirror.testing.processes import LocalCluster, free_port_block, kmirror

TICKS = os.sysconf("SC_CLK_TCK")
PLOT = Path(__file__).resolve().parents[1] / "docs" / "sasl_logins.png"
KRB5 = "com.sun.security.auth.module.Krb5LoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def node_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


async def storm(port: int, security: ClientSecurity, seconds: float, concurrency: int) -> list[float]:
    """Login latencies (s) of `concurrency` tasks connecting and closing for `seconds`."""
    latencies: list[float] = []
    deadline = time.monotonic() + seconds

    async def one() -> None:
        while time.monotonic() < deadline:
            started = time.perf_counter()
            conn = BrokerConnection("127.0.0.1", port, security=security)
            await conn.connect()
            latencies.append(time.perf_counter() - started)
            await conn.close()
    await asyncio.gather(*(one() for _ in range(concurrency)))
    return latencies


def cases(directory: Path, idp: IdentityProvider, kdc: Kdc | None) -> dict[str, dict[str, str]]:
    out = {
        "PLAINTEXT": {},
        "PLAIN": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                  "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                                      'username="alice" password="alice-secret";'},
        "SCRAM-SHA-256": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                          "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                              'username="bob" password="bob-secret";'},
        "OAUTHBEARER": {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                        "sasl.oauthbearer.token.endpoint.url": idp.token_endpoint,
                        "sasl.jaas.config": f'{OAUTH} required clientId="app" clientSecret="app-secret";'},
    }
    if kdc is not None:
        keytab = directory / "carol.keytab"
        kdc.add_principal("carol", keytab)
        out["GSSAPI"] = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
                         "sasl.kerberos.service.name": "kafka",
                         "sasl.jaas.config": f'{KRB5} required useKeyTab=true keyTab="{keytab}" '
                                             f'principal="{kdc.principal("carol")}";'}
    return out


def node_config(port: int, idp: IdentityProvider, kdc: Kdc | None, directory: Path) -> dict[str, str]:
    mechanisms = ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"] + (["GSSAPI"] if kdc is not None else [])
    config = {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1},"
                     f"CONTROLLER://127.0.0.1:{port + 100}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{port + 1}",
        "sasl.enabled.mechanisms": ",".join(mechanisms),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";',
        "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": f"{OAUTH} required;",
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwks.endpoint.url": idp.jwks_url, "sasl.oauthbearer.expected.audience": AUDIENCE,
        "max.connections.per.ip": "100000",
    }
    if kdc is not None:
        keytab = directory / "kafka.keytab"
        kdc.add_principal("kafka/127.0.0.1", keytab)
        config.update({"sasl.kerberos.service.name": "kafka",
                       "listener.name.sasl_plaintext.gssapi.sasl.jaas.config":
                           f'{KRB5} required useKeyTab=true keyTab="{keytab}" '
                           f'principal="{kdc.principal("kafka/127.0.0.1")}";'})
    return config


def run(seconds: float, concurrency: int, directory: Path) -> list[tuple[str, int, float, float, float, float]]:
    kdc: Kdc | None = None
    try:
        kdc = Kdc(directory / "kdc").start()
        os.environ["KRB5_CONFIG"] = str(kdc.krb5_conf)
    except (KdcUnavailable, RuntimeError) as exc:
        print(f"GSSAPI skipped: {exc}")
    rows = []
    with IdentityProvider({"app": "app-secret"}) as idp:
        port = free_port_block(2)
        cluster = LocalCluster(directory / "node", port, 1, node_config(port, idp, kdc, directory))
        cluster.up()
        try:
            kmirror("configs", "--bootstrap-server", f"127.0.0.1:{port}", "--entity-type", "users",
                    "--entity-name", "bob", "--alter", "--add-config", "SCRAM-SHA-256=[password=bob-secret]")
            for name, props in cases(directory, idp, kdc).items():
                security = client_security(props)
                target = port if name == "PLAINTEXT" else port + 1
                asyncio.run(storm(target, security, 1.0, 2))  # warm-up: token fetched, tickets cached
                cpu0 = node_cpu_s(cluster.pid())
                latencies = asyncio.run(storm(target, security, seconds, concurrency))
                cpu_ms = (node_cpu_s(cluster.pid()) - cpu0) * 1000 / len(latencies)
                p50 = statistics.median(latencies) * 1000
                p99 = sorted(latencies)[int(0.99 * (len(latencies) - 1))] * 1000
                rows.append((name, len(latencies), len(latencies) / seconds, p50, p99, cpu_ms))
                print(f"{name}: {len(latencies) / seconds:.0f} logins/s, p50 {p50:.1f} ms, node {cpu_ms:.2f} CPU ms")
        finally:
            cluster.down()
            if kdc is not None:
                kdc.stop()
    return rows


def table(rows: list[tuple[str, int, float, float, float, float]]) -> str:
    base = rows[0][5]
    lines = ["| case | logins | logins/s | p50 ms | p99 ms | node CPU ms/login | vs PLAINTEXT |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for name, n, rate, p50, p99, cpu in rows:
        lines.append(f"| {name} | {n} | {rate:.0f} | {p50:.1f} | {p99:.1f} | {cpu:.2f} | {cpu / base:.1f}x |")
    return "\n".join(lines)


def plot(rows: list[tuple[str, int, float, float, float, float]], path: Path) -> None:
    save_bar_pair(path, [r[0] for r in rows], ("node CPU ms per login", [r[5] for r in rows]),
                  ("logins/s (one client process)", [r[2] for r in rows]),
                  "SASL logins against PLAINTEXT connections, same run")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--out", type=Path, default=None, help="append the table to this markdown file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        rows = run(args.seconds, args.concurrency, Path(d))
    plot(rows, PLOT)
    report(table(rows), PLOT, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
