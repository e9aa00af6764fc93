"""DescribeUserScramCredentials (key 50, v0; KIP-554): users' SCRAM mechanisms and iterations
from the metadata image (never salts or keys). A null or empty user list describes every user."""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from kmirror.broker.api import RequestContext, api
from kmirror.broker.services import BrokerServices
from kmirror.protocol.entities import build, nested


@api(50, "DescribeUserScramCredentials", 0, 0)
def handle(services: BrokerServices, ctx: RequestContext, request: Any) -> Any:
    rt = ctx.response_type
    # null or empty: every user (Kafka describes all users for both)
    users = [u.name for u in request.users] if request.users else None
    found = services.metadata.describe_user_scram_credentials(users)
    result_cls = nested(rt, "DescribeUserScramCredentialsResult")
    info_cls = nested(rt, "CredentialInfo")
    results = tuple(
        build(result_cls, user=d.user, error_code=d.error.code,
              error_message=d.error.message if d.error.code != ErrorCode.none else None,
              credential_infos=tuple(build(info_cls, mechanism=i8(m), iterations=i32(it))
                                     for m, it in d.credentials))
        for d in found)
    return build(rt, throttle_time=datetime.timedelta(0), error_code=ErrorCode.none, error_message=None,
                 results=results)
