"""Admin methods for SCRAM credentials (Kafka Admin `describeUserScramCredentials`,
`alterUserScramCredentials`, KIP-554).

`ScramAdmin` is mixed into `kmirror.client.admin.Admin`; it needs `self.cluster`. As Kafka's
Admin, the client draws a random salt and sends `Hi(password, salt, iterations)`; the
password never leaves the client.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from kio.static.primitive import i8, i32

from kmirror.client.cluster import Cluster
from kmirror.client.errors import KafkaError, check
from kmirror.protocol.entities import build, nested
from kmirror.security.scram import ScramMechanism, salted_password

DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
SALT_BYTES = 32


@dataclass(frozen=True, slots=True)
class ScramUpsert:
    user: str
    mechanism: ScramMechanism
    iterations: int
    password: str


@dataclass(frozen=True, slots=True)
class ScramDelete:
    user: str
    mechanism: ScramMechanism


class ScramAdmin:
    cluster: Cluster

    async def describe_user_scram_credentials(
        self, users: Iterable[str] | None = None
    ) -> dict[str, list[tuple[ScramMechanism, int]] | KafkaError]:
        """user -> [(mechanism, iterations)] or its error; every user with a credential when None."""
        conn = await self.cluster.any_connection()
        rt = conn.request_type(DESCRIBE_USER_SCRAM_CREDENTIALS)
        named = None if users is None else tuple(build(nested(rt, "UserName"), name=u) for u in users)
        response = await conn.send(build(rt, users=named))
        check(response.error_code, response.error_message, "DescribeUserScramCredentials")
        out: dict[str, list[tuple[ScramMechanism, int]] | KafkaError] = {}
        for r in response.results:
            if int(r.error_code):
                out[r.user] = KafkaError(int(r.error_code), r.error_message, "DescribeUserScramCredentials")
            else:
                out[r.user] = [(ScramMechanism.from_type(int(c.mechanism)), int(c.iterations))
                               for c in r.credential_infos]
        return out

    async def alter_user_scram_credentials(
        self, alterations: Iterable[ScramUpsert | ScramDelete]
    ) -> dict[str, KafkaError | None]:
        """user -> None when altered, else its error (Kafka's per-user result)."""
        wanted = list(alterations)
        conn = await self.cluster.controller_connection()
        rt = conn.request_type(ALTER_USER_SCRAM_CREDENTIALS)
        deletions, upsertions = [], []
        for a in wanted:
            if isinstance(a, ScramDelete):
                deletions.append(build(nested(rt, "ScramCredentialDeletion"), name=a.user, mechanism=i8(a.mechanism)))
            else:
                salt = secrets.token_bytes(SALT_BYTES)
                salted = salted_password(a.mechanism, a.password, salt, a.iterations) if a.iterations > 0 else b""
                upsertions.append(build(nested(rt, "ScramCredentialUpsertion"), name=a.user,
                                        mechanism=i8(a.mechanism), iterations=i32(a.iterations), salt=salt,
                                        salted_password=salted))
        response = await conn.send(build(rt, deletions=tuple(deletions), upsertions=tuple(upsertions)))
        return {r.user: (KafkaError(int(r.error_code), r.error_message, "AlterUserScramCredentials")
                         if int(r.error_code) else None) for r in response.results}
