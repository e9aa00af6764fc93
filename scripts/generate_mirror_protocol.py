"""Generate the KIP-1279 RPC entities of src/kmirror/protocol/mirror/ from their JSON schemas.

The schemas live in src/kmirror/protocol/mirror/schemas/, one file per request and per response
in Apache Kafka's message-schema format (clients/src/main/resources/common/message/*.json),
whole-line `//` comments allowed. The RPC `<Name>` (files <Name>Request.json and
<Name>Response.json) becomes the module <snake_name>.py: kio-style entities (frozen, slotted,
keyword-only dataclasses with `__type__`, `__version__`, `__flexible__`, `__api_key__`,
`__header_schema__` and `kafka_type` / `tag` field metadata), which kio's entity_reader and
entity_writer encode as they encode kio's own generated schemas.

Rules (kio's, except error codes):
- intN -> iN (`kafka_type` "intN"); int32 `...Ms` -> i32Timedelta ("timedelta_i32", name
  without `_ms`); string -> str; bool -> bool; uuid -> `uuid.UUID | None` (the zero UUID).
  ErrorCode stays int16: kio's `error_code` type only decodes the codes kio knows.
- `[]T` with `fields` -> a nested entity T and `tuple[T, ...]`; `[]primitive` -> a tuple
  that defaults to `()`.
- `nullableVersions` -> `| None`; `default` -> the dataclass default ("null" -> None);
  `taggedVersions` + `tag` -> the `tag` metadata (a tagged field needs a default).
- `about` -> the field's docstring. The leading `//` comments of the request, then of the
  response schema, follow the generated first line of the module docstring.
- Entities come in the schemas' order, each nested entity before the one holding it.
Anything else (commonStructs, several valid versions, other types) is refused with a message.

Usage: python scripts/generate_mirror_protocol.py [--check] [--out DIR]
  --check  write nothing; name every generated file that differs and exit 1.
  --out    where the modules go (default: the package next to the schemas).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "src" / "kmirror" / "protocol" / "mirror"
SCHEMAS = PACKAGE / "schemas"

_INTS = {"int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64"}
_PRIMITIVES = {**_INTS, "string": "str", "bool": "bool", "uuid": "uuid.UUID | None"}
_IMPORT_ORDER = ("i8", "i16", "i32", "i32Timedelta", "i64")  # isort's order, as ruff checks it


class SchemaError(ValueError):
    pass


@dataclass(frozen=True)
class Schema:
    path: Path
    spec: dict[str, Any]
    comment: tuple[str, ...]  # the leading `//` lines, without the slashes


def load_schema(path: Path) -> Schema:
    lines = path.read_text(encoding="utf-8").splitlines()
    is_comment = [line.lstrip().startswith("//") for line in lines]
    leading = len(lines) if all(is_comment) else is_comment.index(False)
    comment = tuple(line.lstrip()[2:].removeprefix(" ") for line in lines[:leading])
    body = "\n".join(line for line, skip in zip(lines, is_comment, strict=True) if not skip)
    try:
        spec = json.loads(body)
    except json.JSONDecodeError as e:
        raise SchemaError(f"{path.name}: {e}") from None
    return Schema(path, spec, comment)


def _versions(spec: str) -> range:
    """Kafka's version ranges: "none", "3", "0-2", "1+"."""
    if spec == "none":
        return range(0)
    if spec.endswith("+"):
        return range(int(spec[:-1]), 2**15)
    low, _, high = spec.partition("-")
    return range(int(low), int(high or low) + 1)


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _docstring(text: str, indent: str) -> str:
    text = text.replace("\\", "\\\\")
    if '"""' in text or text.endswith('"'):
        text = text.replace('"', '\\"')
    return f'{indent}"""{text}"""'


@dataclass
class _Module:
    """One RPC's module, filled by walking its request's and response's fields."""

    version: int
    flexible: bool
    classes: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)
    primitives: set[str] = field(default_factory=lambda: {"i16"})
    uses_uuid: bool = False
    uses_field: bool = False

    def entity(self, name: str, kind: str, header: str, fields: list[dict[str, Any]]) -> None:
        if name in self.names:
            raise SchemaError(f"two entities named {name} in one RPC")
        self.names.add(name)
        body = [line for spec in fields if self.version in _versions(spec["versions"])
                for line in self._field(spec, header)]
        self.classes.append("\n".join([
            "@dataclass(frozen=True, slots=True, kw_only=True)",
            f"class {name}:",
            f"    __type__: ClassVar = EntityType.{kind}",
            f"    __version__: ClassVar[i16] = i16({self.version})",
            f"    __flexible__: ClassVar[bool] = {self.flexible}",
            "    __api_key__: ClassVar[i16] = i16(API_KEY)",
            f"    __header_schema__: ClassVar[type[{header}]] = {header}",
            *body,
        ]))

    def _field(self, spec: dict[str, Any], header: str) -> list[str]:
        name, kafka_type = spec["name"], spec["type"]
        where = f"field {name or '(unnamed)'}"
        if not name:
            raise SchemaError(f"{where}: every field needs a name")
        python_name = _snake(name)
        nullable = self.version in _versions(spec.get("nullableVersions", "none"))
        metadata: dict[str, Any] = {}
        default = spec.get("default")
        rendered_default: str | None = None
        if kafka_type.startswith("[]") and "fields" in spec:
            item = kafka_type[2:]
            self.entity(item, "nested", header, spec["fields"])
            annotation = f"tuple[{item}, ...]"
            if default is not None:
                raise SchemaError(f"{where}: a default on an array of entities is not supported")
        elif kafka_type.startswith("[]"):
            item = kafka_type[2:]
            annotation = f"tuple[{self._primitive(item, where)}, ...]"
            metadata["kafka_type"] = item
            rendered_default = "()"
            if default is not None:
                raise SchemaError(f"{where}: an array of {item} always defaults to empty")
        elif kafka_type == "int32" and name.endswith("Ms"):
            annotation, python_name = "i32Timedelta", python_name.removesuffix("_ms")
            self.primitives.add(annotation)
            metadata["kafka_type"] = "timedelta_i32"
            if default is not None:
                raise SchemaError(f"{where}: a default on a duration is not supported")
        else:
            annotation = self._primitive(kafka_type, where)
            metadata["kafka_type"] = kafka_type
            if default is not None:
                rendered_default = self._default(str(default), kafka_type, nullable, where)
        if nullable and not annotation.endswith("| None"):
            annotation += " | None"
        if self.version in _versions(spec.get("taggedVersions", "none")):
            metadata["tag"] = spec["tag"]
            if rendered_default is None:
                raise SchemaError(f"{where}: a tagged field needs a default")
        arguments = [f"metadata={json.dumps(metadata)}"] if metadata else []
        if rendered_default is not None:
            arguments.append(f"default={rendered_default}")
        line = f"    {python_name}: {annotation}"
        if arguments:
            self.uses_field = True
            line += f" = field({', '.join(arguments)})"
        return [line, _docstring(spec.get("about", ""), "    ")]

    def _primitive(self, kafka_type: str, where: str) -> str:
        if kafka_type not in _PRIMITIVES:
            raise SchemaError(f"{where}: type {kafka_type} is not supported")
        if kafka_type in _INTS:
            self.primitives.add(_INTS[kafka_type])
        self.uses_uuid |= kafka_type == "uuid"
        return _PRIMITIVES[kafka_type]

    def _default(self, default: str, kafka_type: str, nullable: bool, where: str) -> str:
        if default == "null":
            if not nullable:
                raise SchemaError(f"{where}: default null on a field that is not nullable")
            return "None"
        if kafka_type in _INTS:
            return f"{_INTS[kafka_type]}({int(default)})"
        if kafka_type == "string":
            return json.dumps(default)
        if kafka_type == "bool" and default in ("true", "false"):
            return str(default == "true")
        raise SchemaError(f"{where}: default {default!r} is not supported for {kafka_type}")


def generate_module(request: Schema, response: Schema) -> str:
    """The source of one RPC's module."""
    rpc = request.spec["name"].removesuffix("Request")
    api_key, versions = request.spec["apiKey"], request.spec["validVersions"]
    if (response.spec["name"], response.spec["apiKey"], response.spec["validVersions"]) != (
            f"{rpc}Response", api_key, versions):
        raise SchemaError(f"{response.path.name} does not answer {request.path.name}")
    if not re.fullmatch(r"\d+", versions):
        raise SchemaError(f"{request.path.name}: only one valid version is supported, not {versions}")
    version = int(versions)
    flexible = version in _versions(request.spec["flexibleVersions"])
    if flexible != (version in _versions(response.spec["flexibleVersions"])):
        raise SchemaError(f"{rpc}: request and response disagree on flexibleVersions")
    module = _Module(version, flexible)
    module.entity(f"{rpc}Request", "request", "RequestHeader", request.spec["fields"])
    module.entity(f"{rpc}Response", "response", "ResponseHeader", response.spec["fields"])

    summary = f'{rpc} (API key {api_key}, v{version}{", flexible" if flexible else ""}): ' \
        f'KIP-1279 "Protocol Changes" > {rpc}.'
    notes = ["\n".join(s.comment) for s in (request, response) if s.comment]
    docstring = _docstring("\n\n".join([summary, *notes]) + "\n", "")
    primitives = ", ".join(p for p in _IMPORT_ORDER if p in module.primitives)
    if unknown := module.primitives.difference(_IMPORT_ORDER):
        raise SchemaError(f"{rpc}: no import order for {sorted(unknown)}")
    header = f"# Generated from schemas/{request.path.name} and schemas/{response.path.name} " \
        "by scripts/generate_mirror_protocol.py: do not edit by hand."
    imports = [
        *(["import uuid"] if module.uses_uuid else []),
        "from dataclasses import dataclass" + (", field" if module.uses_field else ""),
        "from typing import ClassVar",
        "",
        f"from kio.schema.request_header.{'v2' if flexible else 'v1'}.header import RequestHeader",
        f"from kio.schema.response_header.{'v1' if flexible else 'v0'}.header import ResponseHeader",
        "from kio.static.constants import EntityType",
        f"from kio.static.primitive import {primitives}",
    ]
    head = "\n\n".join([header + "\n" + docstring, "\n".join(imports), f"API_KEY = {api_key}"])
    return "\n\n\n".join([head, *module.classes]) + "\n"


def generate(schemas: Path = SCHEMAS) -> dict[str, str]:
    """Module file name -> source, for every <Name>Request.json / <Name>Response.json pair."""
    modules: dict[str, str] = {}
    for request_path in sorted(schemas.glob("*Request.json")):
        rpc = request_path.name.removesuffix("Request.json")
        response_path = schemas / f"{rpc}Response.json"
        if not response_path.exists():
            raise SchemaError(f"{request_path.name} has no {response_path.name}")
        try:
            source = generate_module(load_schema(request_path), load_schema(response_path))
        except KeyError as e:
            raise SchemaError(f"{rpc}: a schema or one of its fields has no {e}") from None
        modules[f"{_snake(rpc)}.py"] = source
    return modules


def stale(out: Path, modules: dict[str, str]) -> list[str]:
    """The generated files in `out` that are missing or differ from `modules`."""
    return [name for name, source in modules.items()
            if not (out / name).exists() or (out / name).read_text(encoding="utf-8") != source]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file differs")
    parser.add_argument("--out", type=Path, default=PACKAGE, help="where the modules go")
    args = parser.parse_args(argv)
    try:
        modules = generate()
        if args.check:
            differing = stale(args.out, modules)
            for name in differing:
                print(f"{args.out / name}: not what its schemas give; "
                      "run python scripts/generate_mirror_protocol.py", file=sys.stderr)
            return 1 if differing else 0
        for name in stale(args.out, modules):
            (args.out / name).write_text(modules[name], encoding="utf-8")
            print(f"wrote {args.out / name}")
    except SchemaError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
