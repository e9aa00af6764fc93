"""The KIP-1279 RPC modules are what scripts/generate_mirror_protocol.py makes of the schemas."""

import datetime
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from kmirror.testing.scripts import load_script

ROOT = Path(__file__).resolve().parents[4]
SCRIPT = ROOT / "scripts" / "generate_mirror_protocol.py"

gen = load_script("generate_mirror_protocol")


def test_generated_modules_are_current() -> None:
    generated = gen.generate()
    assert len(generated) == 11
    stale = gen.stale(gen.PACKAGE, generated)
    assert not stale, f"regenerate with `python scripts/generate_mirror_protocol.py`: {stale}"


def test_every_module_names_its_schemas_and_says_it_is_generated() -> None:
    for name, source in gen.generate().items():
        first = source.splitlines()[0]
        rpc = "".join(part.capitalize() for part in name.removesuffix(".py").split("_"))
        assert first.startswith(f"# Generated from schemas/{rpc}Request.json and schemas/{rpc}Response.json")
        assert "do not edit by hand" in first


def _schema_dir(tmp_path: Path) -> Path:
    schemas = tmp_path / "schemas"
    shutil.copytree(gen.SCHEMAS, schemas)
    return schemas


def test_a_schema_change_makes_the_module_stale(tmp_path: Path) -> None:
    schemas = _schema_dir(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    for name, source in gen.generate(schemas).items():
        (out / name).write_text(source, encoding="utf-8")
    assert gen.stale(out, gen.generate(schemas)) == []

    path = schemas / "AddTopicsToMirrorRequest.json"
    path.write_text(path.read_text(encoding="utf-8").replace('"tag": 0', '"tag": 1'), encoding="utf-8")
    assert gen.stale(out, gen.generate(schemas)) == ["add_topics_to_mirror.py"]
    assert '"tag": 1}, default=i16(-1)' in gen.generate(schemas)["add_topics_to_mirror.py"]


def test_check_exits_1_when_a_generated_file_differs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(gen.PACKAGE, out, ignore=shutil.ignore_patterns("schemas", "__pycache__"))
    check = [sys.executable, str(SCRIPT), "--check", "--out", str(out)]
    assert subprocess.run(check, capture_output=True).returncode == 0

    (out / "list_mirrors.py").write_text("# edited by hand\n", encoding="utf-8")
    result = subprocess.run(check, capture_output=True, text=True)
    assert result.returncode == 1
    assert "list_mirrors.py" in result.stderr and "add_topics_to_mirror.py" not in result.stderr


def _generate_one(tmp_path: Path, request_fields: list[dict[str, object]]) -> str:
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    common = {"apiKey": 200, "validVersions": "0", "flexibleVersions": "0+"}
    for kind, fields in (("Request", request_fields), ("Response", [])):
        spec = {**common, "type": kind.lower(), "name": f"ExampleThing{kind}", "fields": fields}
        (schemas / f"ExampleThing{kind}.json").write_text(json.dumps(spec), encoding="utf-8")
    source: str = gen.generate(schemas)["example_thing.py"]
    return source


def test_kafka_schema_rules(tmp_path: Path) -> None:
    source = _generate_one(tmp_path, [
        {"name": "TimeoutMs", "type": "int32", "versions": "0+", "about": "A duration."},
        {"name": "Ids", "type": "[]int64", "versions": "0+", "about": "Plain ints."},
        {"name": "Gone", "type": "int8", "versions": "1+", "about": "Not in v0."},
        {"name": "Note", "type": "string", "versions": "0+", "nullableVersions": "0+", "default": "null",
         "taggedVersions": "0+", "tag": 3, "about": 'Says "hi"'},
    ])
    assert 'timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})' in source
    assert 'ids: tuple[i64, ...] = field(metadata={"kafka_type": "int64"}, default=())' in source
    assert "gone" not in source
    assert 'note: str | None = field(metadata={"kafka_type": "string", "tag": 3}, default=None)' in source
    assert '"""Says \\"hi\\""""' in source  # quotes escaped where one would close the docstring
    namespace: dict[str, Any] = {}
    exec(compile(source, "example_thing.py", "exec"), namespace)
    request = namespace["ExampleThingRequest"](timeout=datetime.timedelta(seconds=1), ids=(7,), note="n")
    buffer = io.BytesIO()
    entity_writer(type(request))(buffer, request)
    assert entity_reader(type(request))(buffer.getvalue(), 0)[0] == request


@pytest.mark.parametrize(("field", "message"), [
    ({"name": "X", "type": "float64", "versions": "0+"}, "type float64 is not supported"),
    ({"name": "X", "type": "int32", "versions": "0+", "taggedVersions": "0+", "tag": 0}, "needs a default"),
    ({"name": "X", "type": "string", "versions": "0+", "default": "null"}, "not nullable"),
    ({"name": "", "type": "int32", "versions": "0+"}, "needs a name"),
    ({"name": "X", "type": "int32"}, "has no 'versions'"),
])
def test_unsupported_schemas_are_refused(tmp_path: Path, field: dict[str, object], message: str) -> None:
    with pytest.raises(gen.SchemaError, match=message):
        _generate_one(tmp_path, [field])
