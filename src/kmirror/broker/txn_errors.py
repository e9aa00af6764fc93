"""Error spelling of the transaction APIs across versions (KIP-588): PRODUCER_FENCED is
answered only from the version that introduced it, INVALID_PRODUCER_EPOCH before."""

from __future__ import annotations

from kmirror.protocol.errors import ErrorCode


def coordinator_error_for_version(error: ErrorCode, api_version: int, *, fenced_since: int) -> ErrorCode:
    if error == ErrorCode.producer_fenced and api_version < fenced_since:
        return ErrorCode.invalid_producer_epoch
    return error
