"""Compile a ``StructType`` at one version into a decoder and an encoder, once, and cache them.

Why compile: the broker decodes a Produce request and encodes a Fetch response for every client
round trip, so the per-field work must not re-read the spec. For each (struct, version,
flexible) we generate the source of one straight-line function, as Kafka's message generator
does for Java (and kafka-python for Python): consecutive fixed-width fields become one bounds
check and one ``struct`` call, each variable-width field one call to a bounded reader/writer
below. ``decoder_source``/``encoder_source`` show the generated code. Records fields are sliced
(decode) or appended (encode) without copying.

Decoder: ``decode(buf, pos) -> (message, pos)``; ``buf`` is a memoryview of the whole frame.
Encoder: ``encode(message, out) -> None`` appends bytes-like chunks to the list ``out``.

Flexible versions (KIP-482): strings, bytes and arrays use the compact forms and every struct
ends with a tagged-field section: uvarint count, then per field uvarint tag, uvarint size,
payload. A tagged field is written only when it differs from its default; unknown tags are kept
raw in ``unknown_tags`` (and written back), never rejected.
"""

from __future__ import annotations

import functools
import struct
from typing import Any, Callable

from broker.wire import primitives as prim
from broker.wire.errors import EncodeError, MalformedMessage
from broker.wire.schema import (
    BYTES, RECORDS, STRING, UUID, VARINT, VARLONG, ArrayOf, Field, Primitive, StructType,
)

__all__ = ["struct_decoder", "struct_encoder", "decoder_source", "encoder_source", "size_min"]

Decoder = Callable[[memoryview, int], "tuple[Any, int]"]
Encoder = Callable[[Any, list], None]


def _split_fields(stype: StructType, version: int, flexible: bool) -> tuple[list[Field], list[Field]]:
    """(fields in wire order, fields carried in the tagged section) for this version."""
    present = [f for f in stype.fields if f.present_in(version)]
    tagged = [f for f in present if flexible and f.tagged_in(version)]
    regular = [f for f in present if not (flexible and f.tagged_in(version))]
    return regular, sorted(tagged, key=lambda f: f.tag)


@functools.cache
def size_min(ftype, version: int, flexible: bool) -> int:
    """The fewest bytes one value of ``ftype`` can occupy (never 0, so counts stay bounded)."""
    if isinstance(ftype, Primitive):
        return ftype.compact_size_min if flexible else ftype.size_min
    if isinstance(ftype, ArrayOf):
        return 1 if flexible else 4
    regular, _ = _split_fields(ftype, version, flexible)
    total = sum(1 if _is_nullable_struct(f, version) else size_min(f.type, version, flexible)
                for f in regular) + (1 if flexible else 0)
    return max(total, 1)


def _is_nullable_struct(f: Field, version: int) -> bool:
    return isinstance(f.type, StructType) and f.nullable_in(version)


# ----------------------------------------------------------------------------------- decoding


class _Source:
    """Lines of a generated function plus the namespace its names resolve in."""

    def __init__(self, title: str, **names: Any) -> None:
        self.title = title
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = dict(names)

    def name(self, prefix: str, value: Any) -> str:
        key = f"{prefix}{len(self.namespace)}"
        self.namespace[key] = value
        return key

    def add(self, indent: int, line: str) -> None:
        self.lines.append("    " * indent + line)

    def compile(self, function: str):
        source = "\n".join(self.lines) + "\n"
        exec(compile(source, f"<broker.wire {self.title}>", "exec"), self.namespace)
        compiled = self.namespace[function]
        compiled.source = source
        return compiled


def _groups(fields: list[Field]):
    """Split wire-order fields into runs of fixed-width primitives and single other fields."""
    run: list[Field] = []
    for f in fields:
        assert f.name.isidentifier(), f.name  # names are inlined into generated code
        if isinstance(f.type, Primitive) and f.type.fmt is not None:
            run.append(f)
            continue
        if run:
            yield run
            run = []
        yield [f]
    if run:
        yield run


def _is_fixed(group: list[Field]) -> bool:
    return isinstance(group[0].type, Primitive) and group[0].type.fmt is not None


def _run_label(owner: str, run: list[Field]) -> str:
    return f"{owner}.{run[0].name}" + (f"..{run[-1].name}" if len(run) > 1 else "")


@functools.cache
def struct_decoder(stype: StructType, version: int, flexible: bool) -> Decoder:
    regular, tagged = _split_fields(stype, version, flexible)
    src = _Source(f"decode {stype.name} v{version}", new=object.__new__, cls=stype.message_class,
                  truncated=prim.truncated)
    src.add(0, "def decode(buf, pos):")
    src.add(1, "end = len(buf)")
    src.add(1, "obj = new(cls)")
    on_wire = {f.name for f in regular}
    for f in stype.fields:  # absent in this version, or tagged: start from the default
        if f.name in on_wire:
            continue
        if f.default_factory is not None:
            src.add(1, f"obj.{f.name} = {src.name('factory', f.default_factory)}()")
        else:
            src.add(1, f"obj.{f.name} = {src.name('default', f.default)}")
    src.add(1, "obj.unknown_tags = None")
    for group in _groups(regular):
        if _is_fixed(group):
            _decode_fixed_run(src, stype.name, group)
        else:
            f, nullable, label = group[0], group[0].nullable_in(version), f"{stype.name}.{group[0].name}"
            if f.type is STRING or f.type is RECORDS:  # hot: call the bounded reader directly
                read = _TEXT_AND_RECORD_READERS[f.type is RECORDS, flexible]
                call = f"{src.name('read', read)}(buf, pos, {src.name('label', label)}, {nullable})"
            else:
                read = value_reader(f.type, nullable, version, flexible, label)
                call = f"{src.name('read', read)}(buf, pos)"
            src.add(1, f"obj.{f.name}, pos = {call}")
    if flexible:
        read_tags = src.name("read_tags", _tagged_reader(stype.name, tagged, version))
        src.add(1, "if pos < end and buf[pos] == 0:  # the usual empty tagged-field section")
        src.add(2, "pos += 1")
        src.add(1, "else:")
        src.add(2, f"pos = {read_tags}(buf, pos, obj)")
    src.add(1, "return obj, pos")
    return src.compile("decode")


def _decode_fixed_run(src: _Source, owner: str, run: list[Field]) -> None:
    layout = struct.Struct(">" + "".join(f.type.fmt for f in run))
    label = src.name("label", _run_label(owner, run))
    targets = ", ".join(f"obj.{f.name}" for f in run) + ("," if len(run) == 1 else "")
    src.add(1, f"if end - pos < {layout.size}:")
    src.add(2, f"raise truncated({label}, {layout.size}, pos, end)")
    src.add(1, f"{targets} = {src.name('unpack', layout.unpack_from)}(buf, pos)")
    src.add(1, f"pos += {layout.size}")


_TEXT_AND_RECORD_READERS = {
    (False, False): prim.read_string,
    (False, True): prim.read_compact_string,
    (True, False): prim.read_bytes,
    (True, True): prim.read_compact_bytes,
}


def decoder_source(stype: StructType, version: int, flexible: bool) -> str:
    return struct_decoder(stype, version, flexible).source


def value_reader(ftype, nullable: bool, version: int, flexible: bool, what: str) -> Decoder:
    """A ``read(buf, pos) -> (value, pos)`` for one value of ``ftype``."""
    if isinstance(ftype, StructType):
        if nullable:
            return _nullable_struct_reader(struct_decoder(ftype, version, flexible), what)
        return struct_decoder(ftype, version, flexible)
    if isinstance(ftype, ArrayOf):
        return _array_reader(ftype.element, nullable, version, flexible, what)
    if ftype.fmt is not None:
        return _fixed_reader(ftype.fmt, what)
    if ftype is STRING:
        read_text = prim.read_compact_string if flexible else prim.read_string
        return lambda buf, pos: read_text(buf, pos, what, nullable)
    if ftype is RECORDS or ftype is BYTES:
        read_data = prim.read_compact_bytes if flexible else prim.read_bytes
        if ftype is RECORDS:  # zero-copy: a view into the request frame
            return lambda buf, pos: read_data(buf, pos, what, nullable)
        return lambda buf, pos: _copy_bytes(*read_data(buf, pos, what, nullable))
    if ftype is UUID:
        return lambda buf, pos: prim.read_uuid(buf, pos, what)
    if ftype is VARINT:
        return lambda buf, pos: prim.read_varint(buf, pos, what)
    assert ftype is VARLONG, ftype
    return lambda buf, pos: prim.read_varlong(buf, pos, what)


def _nullable_struct_reader(read_struct: Decoder, what: str) -> Decoder:
    """A nullable struct (e.g. DescribeTopicPartitions' Cursor) is an INT8 marker first, as
    Kafka's generated readers expect: negative for null, else the struct follows."""

    def read(buf, pos):
        if len(buf) - pos < 1:
            raise prim.truncated(what, 1, pos, len(buf))
        if buf[pos] >= 0x80:  # the marker byte is signed: -1 (0xff) is null
            return None, pos + 1
        return read_struct(buf, pos + 1)

    return read


def _copy_bytes(view, pos):
    """BYTES fields are small (auth tokens, metadata); copying frees the frame for reuse."""
    return (None if view is None else bytes(view)), pos


def _fixed_reader(fmt: str, what: str) -> Decoder:
    layout = struct.Struct(">" + fmt)
    size, unpack = layout.size, layout.unpack_from

    def read(buf, pos):
        if len(buf) - pos < size:
            raise prim.truncated(what, size, pos, len(buf))
        return unpack(buf, pos)[0], pos + size

    return read


def _array_reader(element, nullable: bool, version: int, flexible: bool, what: str) -> Decoder:
    item_min = size_min(element, version, flexible)
    if isinstance(element, Primitive) and element.fmt is not None:
        code = element.fmt

        def read_fixed_items(buf, pos):
            count, pos = prim.read_array_count(buf, pos, what, nullable, flexible, item_min)
            if count is None:
                return None, pos
            # read_array_count checked count * item_min <= bytes left: this cannot overrun.
            return list(struct.unpack_from(f">{count}{code}", buf, pos)), pos + count * item_min

        return read_fixed_items
    read_item = value_reader(element, False, version, flexible, what + "[]")

    def read_items(buf, pos):
        count, pos = prim.read_array_count(buf, pos, what, nullable, flexible, item_min)
        if count is None:
            return None, pos
        items = []
        append = items.append
        for _ in range(count):
            item, pos = read_item(buf, pos)
            append(item)
        return items, pos

    return read_items


def _tagged_reader(owner: str, tagged: list[Field], version: int):
    readers = {
        f.tag: (f.name, value_reader(f.type, f.nullable_in(version), version, True, f"{owner}.{f.name}"))
        for f in tagged
    }
    what = f"{owner}.<tagged fields>"

    def read_tags(buf, pos, obj):
        count, pos = prim.read_uvarint(buf, pos, what)
        if count * 2 > len(buf) - pos:  # each tagged field takes >= 2 bytes (tag, size)
            raise MalformedMessage(what, f"{count} tagged fields", f"{len(buf) - pos} bytes left", pos)
        unknown = None
        for _ in range(count):
            tag, pos = prim.read_uvarint(buf, pos, what)
            size, pos = prim.read_uvarint(buf, pos, what)
            if size > len(buf) - pos:
                raise prim.truncated(f"{what} tag {tag}", size, pos, len(buf))
            end = pos + size
            known = readers.get(tag)
            if known is None:
                if unknown is None:
                    unknown = {}
                unknown[tag] = bytes(buf[pos:end])
            else:
                name, read = known
                value, after = read(buf[:end], pos)  # the field may not read past its size
                if after != end:
                    used = f"{after - pos} used"
                    raise MalformedMessage(f"{owner}.{name}", f"{size} bytes", used, pos)
                setattr(obj, name, value)
            pos = end
        obj.unknown_tags = unknown
        return pos

    return read_tags


# ----------------------------------------------------------------------------------- encoding


@functools.cache
def struct_encoder(stype: StructType, version: int, flexible: bool) -> Encoder:
    cls = stype.message_class
    regular, tagged = _split_fields(stype, version, flexible)
    groups = list(_groups(regular))
    fixed_runs = [group for group in groups if _is_fixed(group)]
    src = _Source(f"encode {stype.name} v{version}", cls=cls, struct_error=struct.error,
                  coerce=lambda obj: _coerce(cls, obj),
                  range_error=lambda obj: _range_error(stype.name, fixed_runs, obj))
    src.add(0, "def encode(obj, out):")
    src.add(1, "if type(obj) is not cls:")
    src.add(2, "obj = coerce(obj)")
    src.add(1, "append = out.append")
    src.add(1, "try:")
    if not groups:
        src.add(2, "pass")
    for group in groups:
        if _is_fixed(group):
            pack = src.name("pack", struct.Struct(">" + "".join(f.type.fmt for f in group)).pack)
            src.add(2, f"append({pack}({', '.join(f'obj.{f.name}' for f in group)}))")
        else:
            f, nullable, label = group[0], group[0].nullable_in(version), f"{stype.name}.{group[0].name}"
            if f.type is STRING:  # hot: call the bounded writers directly
                args = f"obj.{f.name}, {src.name('label', label)}, {nullable}, {flexible}"
                src.add(2, f"append({src.name('encode_string', prim.encode_string)}({args}))")
            elif f.type is RECORDS or f.type is BYTES:
                args = f"out, obj.{f.name}, {src.name('label', label)}, {nullable}, {flexible}"
                src.add(2, f"{src.name('write_bytes', prim.write_bytes)}({args})")
            else:
                write = value_writer(f.type, nullable, version, flexible, label)
                src.add(2, f"{src.name('write', write)}(obj.{f.name}, out)")
    src.add(1, "except struct_error:")
    src.add(2, "raise range_error(obj) from None")
    if flexible:
        write_tags = src.name("write_tags", _tagged_writer(stype.name, tagged, version))
        if tagged:
            src.add(1, f"{write_tags}(obj, out)")
        else:  # only unknown tags can follow: usually the single 0 byte
            src.add(1, "if obj.unknown_tags:")
            src.add(2, f"{write_tags}(obj, out)")
            src.add(1, "else:")
            src.add(2, "append(b'\\x00')")
    return src.compile("encode")


def encoder_source(stype: StructType, version: int, flexible: bool) -> str:
    return struct_encoder(stype, version, flexible).source


def _coerce(cls: type, obj: Any):
    if isinstance(obj, dict):
        return cls.from_dict(obj)
    expected = f"expected {cls.__qualname__} or dict, got {type(obj).__qualname__}"
    raise EncodeError(cls._struct.name, expected)


def _range_error(owner: str, fixed_runs: list[list[Field]], obj) -> EncodeError:
    """Name the field whose value does not fit its type (struct.error does not say)."""
    for run in fixed_runs:
        for f in run:
            value = getattr(obj, f.name)
            try:
                struct.pack(">" + f.type.fmt, value)
            except struct.error:
                return EncodeError(f"{owner}.{f.name}", f"{value!r} does not fit {f.type!r}")
    return EncodeError(owner, "a fixed-width value does not fit its type")


def value_writer(ftype, nullable: bool, version: int, flexible: bool, what: str) -> Encoder:
    """A ``write(value, out)`` for one value of ``ftype``."""
    if isinstance(ftype, StructType):
        if nullable:
            return _nullable_struct_writer(struct_encoder(ftype, version, flexible))
        return struct_encoder(ftype, version, flexible)
    if isinstance(ftype, ArrayOf):
        return _array_writer(ftype.element, nullable, version, flexible, what)
    if ftype.fmt is not None:
        return _fixed_writer(ftype, what)
    if ftype is STRING:
        return lambda value, out: out.append(prim.encode_string(value, what, nullable, flexible))
    if ftype is RECORDS or ftype is BYTES:
        return lambda value, out: prim.write_bytes(out, value, what, nullable, flexible)
    if ftype is UUID:
        return lambda value, out: out.append(prim.encode_uuid(value, what))
    if ftype is VARINT:
        return lambda value, out: out.append(prim.encode_varint(value, what))
    assert ftype is VARLONG, ftype
    return lambda value, out: out.append(prim.encode_varlong(value, what))


def _nullable_struct_writer(write_struct: Encoder) -> Encoder:
    def write(value, out):
        if value is None:
            out.append(b"\xff")
        else:
            out.append(b"\x01")
            write_struct(value, out)

    return write


def _fixed_writer(ftype: Primitive, what: str) -> Encoder:
    pack = struct.Struct(">" + ftype.fmt).pack

    def write(value, out):
        try:
            out.append(pack(value))
        except struct.error:
            raise EncodeError(what, f"{value!r} does not fit {ftype!r}") from None

    return write


def _array_writer(element, nullable: bool, version: int, flexible: bool, what: str) -> Encoder:
    if isinstance(element, Primitive) and element.fmt is not None:
        code = element.fmt

        def write_fixed_items(items, out):
            out.append(prim.encode_array_count(items, what, nullable, flexible))
            if items:
                try:
                    out.append(struct.pack(f">{len(items)}{code}", *items))
                except struct.error:
                    raise EncodeError(what, f"an item does not fit {element!r}: {items!r}") from None

        return write_fixed_items
    write_item = value_writer(element, False, version, flexible, what + "[]")

    def write_items(items, out):
        out.append(prim.encode_array_count(items, what, nullable, flexible))
        if items:
            for item in items:
                write_item(item, out)

    return write_items


def _tagged_writer(owner: str, tagged: list[Field], version: int):
    entries = tuple(
        (f.tag, f.name, f.new_default(),
         value_writer(f.type, f.nullable_in(version), version, True, f"{owner}.{f.name}"))
        for f in tagged
    )

    def write_tags(obj, out):
        fields = []
        for tag, name, default, write in entries:
            value = getattr(obj, name)
            if value == default:  # KIP-482: a tagged field at its default is not sent
                continue
            chunks: list = []
            write(value, chunks)
            fields.append((tag, b"".join(chunks)))
        if obj.unknown_tags:
            known = {tag for tag, _, _, _ in entries}
            fields.extend((t, bytes(v)) for t, v in obj.unknown_tags.items() if t not in known)
            fields.sort(key=lambda item: item[0])
        if not fields:
            out.append(b"\x00")
            return
        out.append(prim.encode_uvarint(len(fields)))
        for tag, data in fields:
            out.append(prim.encode_uvarint(tag, owner))
            out.append(prim.encode_uvarint(len(data), owner))
            out.append(data)

    return write_tags
