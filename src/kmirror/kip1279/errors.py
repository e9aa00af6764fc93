"""KIP-1279 error codes ("Public Interfaces" > Errors).

The KIP lists ten new errors with code "TBD". kmirror numbers them 134-143, in the KIP's table
order, right after Apache Kafka 4.2's last code (133 SHARE_SESSION_LIMIT_REACHED); see
docs/design/mirroring-protocol.md. None is retriable: each names a configuration or state the
caller must change (authorization, naming, membership, pause state) and a blind retry of the
same request gets the same answer.

The KIP also reuses four existing codes with mirror-specific messages
(`REUSED_ERRORS`): UNKNOWN_TOPIC_OR_PARTITION (3), COORDINATOR_NOT_AVAILABLE (15),
CLUSTER_AUTHORIZATION_FAILED (31), UNSUPPORTED_VERSION (35, mirroring disabled).

kio's `ErrorCode` enum only knows Kafka's codes and its native reader rejects others, so:
- the mirror RPC entities (`kmirror.protocol.mirror`) carry error codes as plain int16 fields;
- a response of an existing API that must carry a new code (Produce -> READ_ONLY_TOPIC) uses
  `kio_error_code(code)`: an `ErrorCode` member for the code, registered in kio's enum by
  `install_in_kio()` (idempotent), which kio's writer encodes like any other member. kio's
  native *reader* keeps its own table and still rejects these codes, so kmirror's client
  decodes such a response again with the API's schema rebuilt with int16 error codes
  (`kmirror.protocol.mirror.derive`, `int16_error_codes`).
"""

from __future__ import annotations

import enum

from kio.schema.errors import ErrorCode


class MirrorError(enum.IntEnum):
    retriable: bool
    message: str

    def __new__(cls, code: int, retriable: bool, message: str) -> MirrorError:
        obj = int.__new__(cls, code)
        obj._value_ = code
        obj.retriable = retriable
        obj.message = message
        return obj

    MIRROR_AUTHORIZATION_FAILED = 134, False, "Mirror authorization failed"
    READ_ONLY_TOPIC = 135, False, "The topic is read-only because it is a mirror topic on the target cluster"
    INVALID_MIRROR_NAME = 136, False, "The mirror name does not meet the naming rules"
    UNKNOWN_MIRROR = 137, False, "The topic is not assigned to any mirror"
    TOPIC_ALREADY_IN_MIRROR = 138, False, "The topic is already assigned to a mirror"
    TOPIC_NOT_IN_MIRROR = 139, False, "The topic does not belong to the specified mirror"
    MIRROR_TOPIC_ALREADY_PAUSED = 140, False, "The mirror topic is already paused"
    MIRROR_TOPIC_NOT_PAUSED = 141, False, "The mirror topic is not paused"
    MIRROR_TOPIC_BEING_REMOVED = 142, False, "The mirror topic is being removed"
    MIRROR_NOT_EMPTY = 143, False, "The mirror still has active or non-removed topics"


_BY_CODE: dict[int, MirrorError] = {e.value: e for e in MirrorError}


def mirror_error(code: int) -> MirrorError | None:
    """The KIP error with this code, or None."""
    return _BY_CODE.get(code)


MIRRORING_DISABLED_MESSAGE = (
    "Cluster mirroring is disabled (mirror.version=0); enable it with "
    "`kmirror features --bootstrap-server HOST:PORT upgrade --feature mirror.version=1`"
)

# Existing Kafka codes the KIP's table reuses, with the KIP's mirror-specific message.
REUSED_ERRORS: dict[ErrorCode, str] = {
    ErrorCode.unknown_topic_or_partition: "The topic does not exist on the target cluster",
    ErrorCode.coordinator_not_available: "The mirror coordinator is not active",
    ErrorCode.cluster_authorization_failed: "The client is not authorized to perform the mirror operation",
    ErrorCode.unsupported_version: MIRRORING_DISABLED_MESSAGE,
}


def error_name(code: int) -> str:
    """Kafka's upper-case name of any code, Kafka's or the KIP's ("UNKNOWN_ERROR_CODE_<n>" else)."""
    mirror = _BY_CODE.get(code)
    if mirror is not None:
        return mirror.name
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def error_message(code: int) -> str | None:
    """The KIP's default message for a mirror code or a reused code; None for other codes."""
    mirror = _BY_CODE.get(code)
    if mirror is not None:
        return mirror.message
    try:
        return REUSED_ERRORS.get(ErrorCode(code))
    except ValueError:
        return None


def is_retriable(code: int) -> bool:
    mirror = _BY_CODE.get(code)
    if mirror is not None:
        return mirror.retriable
    try:
        return bool(ErrorCode(code).retriable)
    except ValueError:
        return False


_installed: dict[int, ErrorCode] = {}


def install_in_kio() -> None:
    """Register the KIP's codes as members of kio's `ErrorCode` so existing kio schemas can
    carry them (written and read). Idempotent; the members' names are lower-case like kio's."""
    enum_cls = ErrorCode
    for error in MirrorError:
        if error.value in _installed:
            continue
        existing = enum_cls._value2member_map_.get(error.value)
        if existing is not None:
            if existing.name != error.name.lower():
                raise RuntimeError(f"kio already defines error code {error.value} as {existing.name}")
            _installed[error.value] = ErrorCode(error.value)
            continue
        member = int.__new__(enum_cls, error.value)
        member._value_ = error.value
        member._name_ = error.name.lower()
        # kio's members carry these as plain attributes; the enum machinery sets them on
        # members it creates itself
        setattr(member, "retriable", error.retriable)  # noqa: B010
        setattr(member, "__objclass__", enum_cls)  # noqa: B010
        enum_cls._value2member_map_[error.value] = member
        enum_cls._member_map_[member._name_] = member
        _installed[error.value] = member


def kio_error_code(code: int) -> ErrorCode:
    """The kio `ErrorCode` for `code`, including the KIP's codes (installing them if needed)."""
    if code in _BY_CODE:
        install_in_kio()
        return _installed[code]
    return ErrorCode(code)
