"""SCRAM credentials (Kafka's ScramControlManager, KIP-554): alter and describe.

AlterUserScramCredentials carries, per upsertion, the salt and the salted password the
client computed; the controller stores only the salt, the iterations, StoredKey and
ServerKey (`UserScramCredentialRecord`), and a deletion writes a
`RemoveUserScramCredentialRecord`. Errors per user, as Kafka's:
- a user named more than once in one request (deletions and upsertions together):
  DUPLICATE_RESOURCE, and none of that user's alterations apply;
- an unknown mechanism: UNSUPPORTED_SASL_MECHANISM;
- iterations below 4096 or above 16384, or an empty user name: UNACCEPTABLE_CREDENTIAL;
- deleting a credential that does not exist: RESOURCE_NOT_FOUND.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from kmirror.metadata.controller.result import NONE, ApiError, ControllerResult
from kmirror.metadata.image import MetadataImage
from kmirror.metadata.records import Record, RemoveUserScramCredentialRecord, UserScramCredentialRecord
from kmirror.security.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramMechanism,
    credential_from_salted_password,
)

DUPLICATE = ApiError(ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class ScramAlterationResult:
    user: str
    error: ApiError


@dataclass(frozen=True, slots=True)
class ScramDescription:
    user: str
    error: ApiError
    credentials: tuple[tuple[int, int], ...]  # (mechanism type, iterations)


def _mechanism_error(mechanism: int) -> ApiError | None:
    if ScramMechanism.from_type(mechanism) is ScramMechanism.UNKNOWN:
        return ApiError(ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    return None


def _validate_deletion(image: MetadataImage, d: ScramDeletion) -> ApiError:
    if not d.name:
        return ApiError(ErrorCode.unacceptable_credential, "Username must not be empty")
    err = _mechanism_error(d.mechanism)
    if err is not None:
        return err
    if (d.name, d.mechanism) not in image.scram_credentials:
        return ApiError(ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")
    return NONE


def _validate_upsertion(u: ScramUpsertion) -> ApiError:
    if not u.name:
        return ApiError(ErrorCode.unacceptable_credential, "Username must not be empty")
    err = _mechanism_error(u.mechanism)
    if err is not None:
        return err
    if u.iterations < MIN_ITERATIONS:
        return ApiError(ErrorCode.unacceptable_credential, "Too few iterations")
    if u.iterations > MAX_ITERATIONS:
        return ApiError(ErrorCode.unacceptable_credential, "Too many iterations")
    if not u.salt or not u.salted_password:
        return ApiError(ErrorCode.unacceptable_credential, "Salt and salted password must not be empty")
    return NONE


def alter_credentials(image: MetadataImage, deletions: Sequence[ScramDeletion],
                      upsertions: Sequence[ScramUpsertion]) -> ControllerResult[list[ScramAlterationResult]]:
    """One result per user named in the request, in the order users first appear."""
    checked = [(d, _validate_deletion(image, d)) for d in deletions] + \
              [(u, _validate_upsertion(u)) for u in upsertions]
    order = list(dict.fromkeys(a.name for a, _ in checked))
    counts = {name: 0 for name in order}
    for a, _ in checked:
        counts[a.name] += 1
    errors: dict[str, ApiError] = {}
    valid: dict[str, ScramDeletion | ScramUpsertion] = {}
    for a, error in checked:
        if counts[a.name] > 1:
            errors[a.name] = DUPLICATE
        elif error.code != ErrorCode.none:
            errors[a.name] = error
        else:
            valid[a.name] = a
    records: list[Record] = []
    for name in order:
        change = valid.get(name)
        if isinstance(change, ScramDeletion):
            records.append(RemoveUserScramCredentialRecord(change.name, change.mechanism))
        elif isinstance(change, ScramUpsertion):
            mechanism = ScramMechanism.from_type(change.mechanism)
            cred = credential_from_salted_password(mechanism, change.salt, change.salted_password,
                                                   change.iterations)
            records.append(UserScramCredentialRecord(change.name, change.mechanism, cred.salt, cred.stored_key,
                                                     cred.server_key, cred.iterations))
    return ControllerResult(records, [ScramAlterationResult(n, errors.get(n, NONE)) for n in order])


def describe_credentials(image: MetadataImage, users: Sequence[str] | None) -> list[ScramDescription]:
    """Every user with a credential when `users` is None; else one description per named user."""
    by_user: dict[str, list[tuple[int, int]]] = {}
    for (name, mechanism), cred in sorted(image.scram_credentials.items()):
        by_user.setdefault(name, []).append((mechanism, cred.iterations))
    if users is None:
        return [ScramDescription(n, NONE, tuple(c)) for n, c in by_user.items()]
    duplicated = {u for u in users if users.count(u) > 1}
    out: list[ScramDescription] = []
    seen: set[str] = set()
    for user in users:
        if user in seen:
            continue
        seen.add(user)
        if user in duplicated:
            out.append(ScramDescription(user, ApiError(
                ErrorCode.duplicate_resource,
                "Cannot describe SCRAM credentials for the same user twice in a single request"), ()))
        elif user not in by_user:
            out.append(ScramDescription(user, ApiError(ErrorCode.resource_not_found,
                                                       "Attempt to describe nonexistent user"), ()))
        else:
            out.append(ScramDescription(user, NONE, tuple(by_user[user])))
    return out
