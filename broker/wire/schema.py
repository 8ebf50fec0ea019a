"""The declarative vocabulary the API specs are written in.

It mirrors Kafka's ``clients/src/main/resources/common/message/*.json`` (see that folder's
README): a field has a name, a type, the versions it exists in, the versions in which it may be
null, a default, and optionally a tag (KIP-482 tagged fields) with the versions in which it is
tagged. Field order is wire order. Nothing here encodes or decodes; ``codec.py`` compiles these
descriptions, ``message.py`` turns a ``StructType`` into a Python class.

Names are Kafka's JSON names in snake_case ("ThrottleTimeMs" -> ``throttle_time_ms``), which is
also what kafka-python uses, so a Kafka engineer can read a spec against the JSON line by line.
"""

from __future__ import annotations

from dataclasses import dataclass, field as dataclass_field
from typing import Any, Callable, Union

from broker.wire.primitives import ZERO_UUID

__all__ = [
    "VERSION_MAX",
    "Versions",
    "Primitive",
    "ArrayOf",
    "StructType",
    "Field",
    "FieldType",
    "INT8", "INT16", "INT32", "INT64", "UINT16", "FLOAT64", "BOOL",
    "VARINT", "VARLONG", "STRING", "BYTES", "RECORDS", "UUID",
    "array", "struct", "field",
]

VERSION_MAX = 0x7FFF  # api versions are int16; "3+" means 3..VERSION_MAX


@dataclass(frozen=True)
class Versions:
    """An inclusive version range parsed from Kafka's notation: "3+", "0-4", "5" or "none"."""

    low: int
    high: int

    @classmethod
    def parse(cls, text: str) -> "Versions":
        text = text.strip()
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return cls(int(text[:-1]), VERSION_MAX)
        low, _, high = text.partition("-")
        return cls(int(low), int(high or low))

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    def is_empty(self) -> bool:
        return self.low > self.high

    def covers(self, other: "Versions") -> bool:
        return other.is_empty() or (self.low <= other.low and other.high <= self.high)

    def __str__(self) -> str:
        if self.is_empty():
            return "none"
        if self.high == VERSION_MAX:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


NO_VERSIONS = Versions(1, 0)


@dataclass(frozen=True, eq=False)
class Primitive:
    """A scalar type. ``fmt`` is the ``struct`` code for fixed-width types (None otherwise);
    ``size_min``/``compact_size_min`` are the fewest bytes one value takes in classic and in
    flexible versions, used to bound array counts before allocating."""

    name: str
    fmt: str | None
    size_min: int
    compact_size_min: int
    default: Any

    def __repr__(self) -> str:
        return self.name


INT8 = Primitive("int8", "b", 1, 1, 0)
INT16 = Primitive("int16", "h", 2, 2, 0)
INT32 = Primitive("int32", "i", 4, 4, 0)
INT64 = Primitive("int64", "q", 8, 8, 0)
UINT16 = Primitive("uint16", "H", 2, 2, 0)
FLOAT64 = Primitive("float64", "d", 8, 8, 0.0)
BOOL = Primitive("bool", "?", 1, 1, False)
VARINT = Primitive("varint", None, 1, 1, 0)
VARLONG = Primitive("varlong", None, 1, 1, 0)
STRING = Primitive("string", None, 2, 1, "")
BYTES = Primitive("bytes", None, 4, 1, b"")
# RECORDS is nullable bytes holding record batches; the codec hands them out as zero-copy
# memoryviews and never looks inside (that is broker.records' job). The default is empty, not
# null: clients accept an empty record set for a partition with an error.
RECORDS = Primitive("records", None, 4, 1, b"")
UUID = Primitive("uuid", None, 16, 16, ZERO_UUID)


@dataclass(frozen=True, eq=False)
class ArrayOf:
    """``[]T`` in the JSON: an array of a primitive or of a nested struct."""

    element: "FieldType"

    def __repr__(self) -> str:
        return f"[]{self.element!r}"


@dataclass(eq=False)
class StructType:
    """A named struct (a message body, or a nested ``[]FetchTopic``-style element type).
    ``message_class`` is filled in by ``message.make_message_classes`` once the spec is built.
    Compared and hashed by identity, so compiled codecs can be cached per struct."""

    name: str
    fields: tuple["Field", ...]
    message_class: type | None = dataclass_field(default=None, repr=False)

    def __repr__(self) -> str:
        return self.name


FieldType = Union[Primitive, ArrayOf, StructType]

_MISSING: Any = object()


@dataclass(frozen=True, eq=False)
class Field:
    """One field of a struct, as in Kafka's message JSON."""

    name: str
    type: FieldType
    versions: Versions
    nullable_versions: Versions
    default: Any
    tag: int | None
    tagged_versions: Versions

    def present_in(self, version: int) -> bool:
        return version in self.versions

    def nullable_in(self, version: int) -> bool:
        return version in self.nullable_versions

    def tagged_in(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged_versions

    @property
    def default_factory(self) -> Callable[[], Any] | None:
        """A factory for defaults that must not be shared between objects (lists, structs)."""
        if self.default is not _FRESH:
            return None
        if isinstance(self.type, ArrayOf):
            return list
        return self.type.message_class  # an untagged nested struct: a default-built instance

    def new_default(self) -> Any:
        factory = self.default_factory
        return factory() if factory is not None else self.default


_FRESH: Any = object()  # marker: "build a new default per object" (arrays, nested structs)


def array(element: FieldType) -> ArrayOf:
    return ArrayOf(element)


def struct(name: str, *fields: Field) -> StructType:
    names = [f.name for f in fields]
    assert len(set(names)) == len(names), f"{name}: duplicate field names {names}"
    return StructType(name, tuple(fields))


def field(
    name: str,
    type_: FieldType,
    versions: str,
    *,
    nullable: str = "none",
    default: Any = _MISSING,
    tag: int | None = None,
    tagged: str | None = None,
) -> Field:
    """Declare a field. ``versions``/``nullable``/``tagged`` use Kafka's notation ("3+", "0-4").
    Without ``default`` the type's zero value is used (0, "", b"", False, zero UUID, empty
    array); a tagged struct defaults to None (absent). ``tagged`` defaults to ``versions``."""
    present = Versions.parse(versions)
    nullable_versions = Versions.parse(nullable)
    tagged_versions = Versions.parse(tagged or versions) if tag is not None else NO_VERSIONS
    assert present.covers(nullable_versions), f"{name}: nullable outside versions"
    assert present.covers(tagged_versions), f"{name}: tagged outside versions"
    if default is _MISSING:
        default = _type_default(type_, tag is not None)
    else:
        assert default is not None or tag is not None or not nullable_versions.is_empty(), (
            f"{name}: null default for a field that is never nullable"
        )
    return Field(name, type_, present, nullable_versions, default, tag, tagged_versions)


def _type_default(type_: FieldType, tagged: bool) -> Any:
    if isinstance(type_, Primitive):
        return type_.default
    if isinstance(type_, StructType) and tagged:
        return None  # KIP-482: an absent tagged struct; written only when set
    return _FRESH
