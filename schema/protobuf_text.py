"""Protobuf schema text to a ``FileDescriptorProto`` and back.

Parsing the text is proto-schema-parser's (an ANTLR grammar of the .proto language, from PyPI);
resolving names and checking the result is protobuf's own ``DescriptorPool``. What is written by
hand here: turning the parser's syntax tree into a ``FileDescriptorProto`` (map entries, oneofs,
proto3 ``optional``, reserved ranges, services) and printing a descriptor as .proto text, which
protobuf's Python package does not offer. Extensions (``extend``), groups and custom options are
not carried over (docs/schema-registry.md lists this).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ("ProtobufSchemaError", "build_pool", "descriptor_to_text", "to_descriptor")

_SCALARS = {
    "double": 1,
    "float": 2,
    "int64": 3,
    "uint64": 4,
    "int32": 5,
    "fixed64": 6,
    "fixed32": 7,
    "bool": 8,
    "string": 9,
    "bytes": 12,
    "uint32": 13,
    "sfixed32": 15,
    "sfixed64": 16,
    "sint32": 17,
    "sint64": 18,
}
_SCALAR_NAMES = {number: name for name, number in _SCALARS.items()}
_LABELS = {"OPTIONAL": 1, "REQUIRED": 2, "REPEATED": 3}
_MAX_FIELD = 536870911


class ProtobufSchemaError(ValueError):
    """Text that is not a valid Protobuf schema (the message says where)."""


def _parse_text(text: str) -> Any:
    from antlr4.error.ErrorListener import ErrorListener
    from proto_schema_parser.parser import Parser

    class _Raise(ErrorListener):  # type: ignore[misc]
        def syntaxError(
            self, recognizer: Any, symbol: Any, line: int, column: int, msg: str, e: Any
        ) -> None:
            raise ProtobufSchemaError(f"line {line}:{column} {msg}")

    def quiet(recognizer: Any) -> None:
        recognizer.removeErrorListeners()
        recognizer.addErrorListener(_Raise())

    try:
        return Parser(setup_lexer=quiet, setup_parser=quiet).parse(text)
    except ProtobufSchemaError:
        raise
    except Exception as exc:  # the tree builder on an unusual construct
        raise ProtobufSchemaError(f"cannot read the schema: {exc}") from None


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _reserved(fdp_ranges: Any, ranges: Iterable[str]) -> None:
    for text in ranges:
        low, _, high = (s.strip() for s in str(text).partition(" to "))
        start = int(low)
        end = _MAX_FIELD if high == "max" else int(high or low)
        fdp_ranges.add(start=start, end=end + 1)


def _field(message: Any, node: Any, syntax: str, oneof_index: int | None = None) -> None:
    from proto_schema_parser import ast

    if isinstance(node, ast.MapField):
        entry = message.nested_type.add(name=_camel(node.name) + "Entry")
        entry.options.map_entry = True
        for number, (name, type_) in enumerate(
            (("key", node.key_type), ("value", node.value_type)), start=1
        ):
            _set_type(entry.field.add(name=name, number=number, label=1), type_)
        fd = message.field.add(name=node.name, number=node.number, label=3)
        fd.type_name = entry.name
        fd.type = 11
        _options(fd, node.options)
        return
    cardinality = node.cardinality.value if node.cardinality is not None else "OPTIONAL"
    fd = message.field.add(name=node.name, number=node.number, label=_LABELS[cardinality])
    _set_type(fd, node.type)
    _options(fd, node.options)
    if oneof_index is not None:
        fd.oneof_index = oneof_index
    elif syntax == "proto3" and node.cardinality is not None and cardinality == "OPTIONAL":
        fd.proto3_optional = True
        fd.oneof_index = len(message.oneof_decl)
        message.oneof_decl.add(name="_" + node.name)


def _set_type(fd: Any, type_: str) -> None:
    if type_ in _SCALARS:
        fd.type = _SCALARS[type_]
    else:
        fd.type_name = type_  # message or enum: the pool resolves it and sets the type


def _options(fd: Any, options: Iterable[Any]) -> None:
    for option in options:
        if option.name == "default":
            value = option.value
            fd.default_value = str(value).lower() if isinstance(value, bool) else str(value)
        elif option.name == "json_name":
            fd.json_name = str(option.value)
        elif option.name in ("packed", "deprecated", "lazy"):
            setattr(fd.options, option.name, bool(option.value))


def _enum(target: Any, node: Any) -> None:
    from proto_schema_parser import ast

    enum = target.add(name=node.name)
    for element in node.elements:
        if isinstance(element, ast.EnumValue):
            enum.value.add(name=element.name, number=element.number)
        elif isinstance(element, ast.Option) and element.name == "allow_alias":
            enum.options.allow_alias = bool(element.value)


def _message(target: Any, node: Any, syntax: str) -> None:
    from proto_schema_parser import ast

    message = target.add(name=node.name)
    for element in node.elements:
        if isinstance(element, ast.Field | ast.MapField):
            _field(message, element, syntax)
        elif isinstance(element, ast.OneOf):
            index = len(message.oneof_decl)
            message.oneof_decl.add(name=element.name)
            for member in element.elements:
                if isinstance(member, ast.Field):
                    _field(message, member, syntax, index)
        elif isinstance(element, ast.Message):
            _message(message.nested_type, element, syntax)
        elif isinstance(element, ast.Enum):
            _enum(message.enum_type, element)
        elif isinstance(element, ast.Reserved):
            _reserved(message.reserved_range, element.ranges)
            message.reserved_name.extend(element.names)
    # proto3 synthetic oneofs go after the real ones, as protoc orders them
    _order_synthetic_oneofs(message)


def _order_synthetic_oneofs(message: Any) -> None:
    synthetic = {f.oneof_index for f in message.field if f.proto3_optional}
    if not synthetic:
        return
    names = [o.name for o in message.oneof_decl]
    order = [i for i in range(len(names)) if i not in synthetic] + sorted(synthetic)
    remap = {old: new for new, old in enumerate(order)}
    del message.oneof_decl[:]
    for old in order:
        message.oneof_decl.add(name=names[old])
    for fd in message.field:
        if fd.HasField("oneof_index"):
            fd.oneof_index = remap[fd.oneof_index]


def text_to_proto(text: str, name: str) -> Any:
    """A ``FileDescriptorProto`` (names not yet resolved) from .proto text."""
    from google.protobuf import descriptor_pb2
    from proto_schema_parser import ast

    tree = _parse_text(text)
    syntax = tree.syntax or "proto2"
    fdp = descriptor_pb2.FileDescriptorProto(name=name)
    if syntax == "proto3":
        fdp.syntax = "proto3"
    for element in tree.file_elements:
        if isinstance(element, ast.Package):
            fdp.package = element.name
        elif isinstance(element, ast.Import):
            fdp.dependency.append(element.name)
            if element.public:
                fdp.public_dependency.append(len(fdp.dependency) - 1)
        elif isinstance(element, ast.Option):
            field = fdp.options.DESCRIPTOR.fields_by_name.get(element.name)
            if field is not None:
                value = element.value
                if field.type == field.TYPE_ENUM:
                    value = field.enum_type.values_by_name[
                        str(getattr(value, "name", value))
                    ].number
                setattr(fdp.options, element.name, value)
        elif isinstance(element, ast.Message):
            _message(fdp.message_type, element, syntax)
        elif isinstance(element, ast.Enum):
            _enum(fdp.enum_type, element)
        elif isinstance(element, ast.Service):
            service = fdp.service.add(name=element.name)
            for method in element.elements:
                if isinstance(method, ast.Method):
                    service.method.add(
                        name=method.name,
                        input_type=method.input_type.type,
                        output_type=method.output_type.type,
                        client_streaming=method.input_type.stream,
                        server_streaming=method.output_type.stream,
                    )
    return fdp


def to_descriptor(schema: str, name: str) -> Any:
    """``schema`` as .proto text, or as a base64 ``FileDescriptorProto`` (what confluent-kafka's
    Python serializer sends), to an unresolved ``FileDescriptorProto`` named ``name``."""
    try:
        return text_to_proto(schema, name)
    except ProtobufSchemaError as text_error:
        stripped = schema.strip()
        if not stripped or any(c.isspace() for c in stripped):
            raise
        from google.protobuf import descriptor_pb2
        from google.protobuf.message import DecodeError

        try:
            fdp = descriptor_pb2.FileDescriptorProto.FromString(
                base64.b64decode(stripped, validate=True)
            )
        except (binascii.Error, DecodeError, ValueError):
            raise text_error from None
        if not fdp.message_type and not fdp.enum_type and not fdp.service:
            raise text_error from None
        fdp.name = name
        return fdp


def build_pool(fdp: Any, dependencies: Mapping[str, Any]) -> tuple[Any, Any]:
    """Add ``dependencies`` (import name -> unresolved ``FileDescriptorProto``) and ``fdp`` to
    a fresh pool; returns (pool, resolved ``FileDescriptorProto``). Raises
    ``ProtobufSchemaError`` naming what does not resolve."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(file: Any) -> None:
        if file.name in added:
            return
        for dep in file.dependency:
            if dep in dependencies:
                add(dependencies[dep])
            elif _well_known(dep):
                add(_well_known(dep))
            else:
                raise ProtobufSchemaError(f"import {dep!r} has no reference: add it to references")
        added.add(file.name)
        try:
            pool.Add(file)
        except (TypeError, ValueError) as exc:
            raise ProtobufSchemaError(str(exc)) from None

    add(fdp)
    resolved = descriptor_pb2.FileDescriptorProto()
    pool.FindFileByName(fdp.name).CopyToProto(resolved)
    return pool, resolved


def _well_known(name: str) -> Any:
    if not name.startswith("google/protobuf/"):
        return None
    import importlib

    from google.protobuf import descriptor_pb2

    module_name = "google.protobuf." + name.removeprefix("google/protobuf/").replace(
        ".proto", "_pb2"
    )
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    fdp = descriptor_pb2.FileDescriptorProto()
    module.DESCRIPTOR.CopyToProto(fdp)
    return fdp


# -- printing ----------------------------------------------------------------------------------
def _type_of(fd: Any) -> str:
    if fd.type in _SCALAR_NAMES:
        return _SCALAR_NAMES[fd.type]
    return str(fd.type_name)


def _print_field(
    fd: Any, syntax: str, entries: Mapping[str, Any], pad: str, out: list[str]
) -> None:
    entry = entries.get(fd.type_name.rsplit(".", 1)[-1]) if fd.type == 11 else None
    if entry is not None and fd.label == 3:
        key, value = entry.field[0], entry.field[1]
        head = f"map<{_type_of(key)}, {_type_of(value)}>"
    else:
        label = {1: "optional ", 2: "required ", 3: "repeated "}[fd.label]
        if syntax == "proto3" and fd.label == 1 and not fd.proto3_optional:
            label = ""
        if fd.HasField("oneof_index") and not fd.proto3_optional:
            label = ""
        head = label + _type_of(fd)
    options = []
    if fd.HasField("default_value"):
        value = fd.default_value
        options.append(f'default = "{value}"' if fd.type in (9, 12) else f"default = {value}")
    if fd.HasField("json_name") and fd.json_name != _lower_camel(fd.name):
        options.append(f'json_name = "{fd.json_name}"')
    for flag in ("packed", "deprecated", "lazy"):
        if fd.options.HasField(flag):
            options.append(f"{flag} = {str(getattr(fd.options, flag)).lower()}")
    suffix = f" [{', '.join(options)}]" if options else ""
    out.append(f"{pad}{head} {fd.name} = {fd.number}{suffix};")


def _lower_camel(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _print_enum(enum: Any, pad: str, out: list[str]) -> None:
    out.append(f"{pad}enum {enum.name} {{")
    if enum.options.allow_alias:
        out.append(f"{pad}  option allow_alias = true;")
    for value in enum.value:
        out.append(f"{pad}  {value.name} = {value.number};")
    out.append(f"{pad}}}")


def _print_message(message: Any, syntax: str, pad: str, out: list[str]) -> None:
    out.append(f"{pad}message {message.name} {{")
    inner = pad + "  "
    entries = {n.name: n for n in message.nested_type if n.options.map_entry}
    printed_oneofs: set[int] = set()
    for fd in message.field:
        if fd.HasField("oneof_index") and not fd.proto3_optional:
            index = fd.oneof_index
            if index in printed_oneofs:
                continue
            printed_oneofs.add(index)
            out.append(f"{inner}oneof {message.oneof_decl[index].name} {{")
            for member in message.field:
                if member.HasField("oneof_index") and member.oneof_index == index:
                    _print_field(member, syntax, entries, inner + "  ", out)
            out.append(f"{inner}}}")
        else:
            _print_field(fd, syntax, entries, inner, out)
    for nested in message.nested_type:
        if not nested.options.map_entry:
            _print_message(nested, syntax, inner, out)
    for enum in message.enum_type:
        _print_enum(enum, inner, out)
    for reserved in message.reserved_range:
        end = reserved.end - 1
        high = "max" if end >= _MAX_FIELD else str(end)
        text = str(reserved.start) if end == reserved.start else f"{reserved.start} to {high}"
        out.append(f"{inner}reserved {text};")
    if message.reserved_name:
        out.append(
            f"{inner}reserved {', '.join(chr(34) + n + chr(34) for n in message.reserved_name)};"
        )
    out.append(f"{pad}}}")


def descriptor_to_text(fdp: Any) -> str:
    """.proto text for a (resolved) ``FileDescriptorProto``: the registry's canonical form."""
    syntax = fdp.syntax or "proto2"
    out = [f'syntax = "{syntax}";']
    if fdp.package:
        out.append(f"package {fdp.package};")
    if fdp.dependency:
        out.append("")
        public = set(fdp.public_dependency)
        for index, dep in enumerate(fdp.dependency):
            out.append(f'import {"public " if index in public else ""}"{dep}";')
    options = [
        (f.name, v) for f, v in fdp.options.ListFields() if f.type in (f.TYPE_STRING, f.TYPE_BOOL)
    ]
    if options:
        out.append("")
        for option_name, value in options:
            text = f'"{value}"' if isinstance(value, str) else str(value).lower()
            out.append(f"option {option_name} = {text};")
    for message in fdp.message_type:
        out.append("")
        _print_message(message, syntax, "", out)
    for enum in fdp.enum_type:
        out.append("")
        _print_enum(enum, "", out)
    for service in fdp.service:
        out.append("")
        out.append(f"service {service.name} {{")
        for m in service.method:
            cs = "stream " if m.client_streaming else ""
            ss = "stream " if m.server_streaming else ""
            out.append(f"  rpc {m.name}({cs}{m.input_type}) returns ({ss}{m.output_type});")
        out.append("}")
    return "\n".join(out) + "\n"
