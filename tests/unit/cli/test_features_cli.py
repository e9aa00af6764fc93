"""`kmirror features` against fake connections answering with kio's schemas."""

import asyncio
import datetime
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema

from kmirror.cli import features as cli
from kmirror.cli.errors import CommandError
from kmirror.cli.main import build_parser
from kmirror.protocol.entities import build, nested
from kmirror.protocol.errors import ErrorCode


class FakeConnection:
    def __init__(self, api_versions: dict[int, tuple[int, int]], answer: Any) -> None:
        self.api_versions = api_versions
        self.answer = answer
        self.sent: list[Any] = []

    def request_type(self, api_key: int) -> type[Any]:
        return load_request_schema(api_key, self.api_versions[api_key][1])  # type: ignore[no-any-return]

    async def send(self, request: Any) -> Any:
        self.sent.append(request)
        return self.answer(request)


class FakeAdmin:
    def __init__(self, conn: FakeConnection) -> None:
        self.timeout_ms = 5_000

        class Cluster:
            async def any_connection(self) -> FakeConnection:
                return conn

            async def controller_connection(self) -> FakeConnection:
                return conn

        self.cluster = Cluster()


def api_versions_answer(request: Any) -> Any:
    rt = load_response_schema(18, request.__version__)
    Supported, Finalized = nested(rt, "SupportedFeatureKey"), nested(rt, "FinalizedFeatureKey")
    return build(rt, error_code=0, api_keys=(), throttle_time=datetime.timedelta(0),
                 supported_features=(build(Supported, name="mirror.version", min_version=0, max_version=1),
                                     build(Supported, name="metadata.version", min_version=7, max_version=27)),
                 finalized_features_epoch=5,
                 finalized_features=(build(Finalized, name="metadata.version", max_version_level=27,
                                           min_version_level=27),))


def test_describe_asks_v4_and_prints_kafkas_lines() -> None:
    conn = FakeConnection({18: (0, 4)}, api_versions_answer)
    features = asyncio.run(cli.describe_features(FakeAdmin(conn)))  # type: ignore[arg-type]
    assert conn.sent[0].__version__ == 4  # v0-v3 omit features with minimum version 0
    assert cli.format_features(features) == [
        "Feature: metadata.version\tSupportedMinVersion: 7\tSupportedMaxVersion: 27\tFinalizedVersionLevel: 27\tEpoch: 5",
        "Feature: mirror.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 0\tEpoch: 5",
    ]
    assert cli.format_features([cli.FeatureDescription("f", 0, 1, 1, -1)]) == [
        "Feature: f\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\tFinalizedVersionLevel: 1\tEpoch: -"]


def update_answer(codes: dict[str, int], top: int = 0) -> Any:
    def answer(request: Any) -> Any:
        rt = load_response_schema(57, request.__version__)
        if request.__version__ >= 2:  # the top-level error alone
            return build(rt, throttle_time=datetime.timedelta(0), error_code=top, error_message="refused" if top else None)
        Result = nested(rt, "UpdatableFeatureResult")
        return build(rt, throttle_time=datetime.timedelta(0), error_code=top, error_message=None, results=tuple(
            build(Result, feature=u.feature, error_code=codes.get(u.feature, 0),
                  error_message="not allowed" if codes.get(u.feature) else None)
            for u in request.feature_updates))
    return answer


def test_upgrade_mirror_version() -> None:
    conn = FakeConnection({57: (0, 1)}, update_answer({}))
    levels = cli.parse_feature_levels(["mirror.version=1"])
    results = asyncio.run(cli.update_features(FakeAdmin(conn), levels, cli.UpgradeType.UPGRADE,  # type: ignore[arg-type]
                                              validate_only=False))
    update = conn.sent[0].feature_updates[0]
    assert (update.feature, update.max_version_level, update.upgrade_type) == ("mirror.version", 1, 1)
    assert conn.sent[0].timeout == datetime.timedelta(milliseconds=5_000)
    assert cli.format_update_results("upgrade", levels, results, dry_run=False) == (
        ["mirror.version was upgraded to 1."], 0)
    assert cli.format_update_results("upgrade", levels, results, dry_run=True)[0] == [
        "mirror.version can be upgraded to 1."]


def test_downgrade_failure_and_v0_allow_downgrade() -> None:
    conn = FakeConnection({57: (0, 0)}, update_answer({"mirror.version": 42}))
    levels = cli.parse_feature_levels(["mirror.version=0"])
    results = asyncio.run(cli.update_features(FakeAdmin(conn), levels,  # type: ignore[arg-type]
                                              cli.UpgradeType.SAFE_DOWNGRADE, validate_only=False))
    assert conn.sent[0].feature_updates[0].allow_downgrade is True
    lines, failed = cli.format_update_results("downgrade", levels, results, dry_run=False)
    assert lines == ["Could not downgrade mirror.version to 0. not allowed"] and failed == 1


def test_top_level_error_applies_to_every_feature() -> None:
    conn = FakeConnection({57: (0, 1)}, update_answer({}, top=41))
    results = asyncio.run(cli.update_features(FakeAdmin(conn), {"a": 1}, cli.UpgradeType.UPGRADE,  # type: ignore[arg-type]
                                              validate_only=True))
    assert conn.sent[0].validate_only is True
    err = results["a"]
    assert err is not None and err.error_name == "NOT_CONTROLLER"


def test_feature_arguments() -> None:
    assert cli.parse_feature_levels(["a=1", "b = 2"]) == {"a": 1, "b": 2}
    assert cli.parse_feature_levels(["mirror.version"], disable=True) == {"mirror.version": 0}
    for bad in (["a"], ["a=x"], ["=1"], ["a=1", "a=2"]):
        with pytest.raises(CommandError):
            cli.parse_feature_levels(bad)
    args = build_parser().parse_args(["features", "--bootstrap-server", ":9092", "upgrade",
                                      "--feature", "mirror.version=1"])
    assert args.features_command == "upgrade" and args.feature == ["mirror.version=1"]
    args = build_parser().parse_args(["features", "--bootstrap-server", ":9092", "downgrade", "--unsafe",
                                      "--feature", "mirror.version=0"])
    assert args.unsafe


def test_a_v2_answer_has_the_top_level_error_alone() -> None:
    for top, expected in ((0, (None, None)), (int(ErrorCode.invalid_update_version), ("INVALID_UPDATE_VERSION", "INVALID_UPDATE_VERSION"))):
        conn = FakeConnection({57: (0, 2)}, update_answer({}, top=top))
        results = asyncio.run(cli.update_features(FakeAdmin(conn), {"a": 1, "b": 2},  # type: ignore[arg-type]
                                                  cli.UpgradeType.UPGRADE, validate_only=False))
        assert conn.sent[0].__version__ == 2
        assert tuple(None if results[f] is None else results[f].error_name for f in ("a", "b")) == expected
