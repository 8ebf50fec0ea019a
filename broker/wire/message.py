"""Python classes generated from a ``StructType``: the typed objects the codec decodes into and
encodes from.

One class per struct covers every version (Kafka's ``*Data`` classes do the same): its slots are
the union of the fields of all versions; a field absent from the decoded version holds its
default. Nested struct classes hang off the top-level class by their Kafka type name, e.g.
``FetchRequest.FetchTopic``, as in Kafka's generated ``FetchRequestData.FetchTopic``.

``__slots__`` makes a misspelt attribute an AttributeError instead of a silently ignored field.
``unknown_tags`` holds tagged fields this spec does not know (tag -> raw bytes), so a message
relayed through us keeps them (Kafka's ``_unknownTaggedFields``).
"""

from __future__ import annotations

import keyword
from typing import Any

from broker.wire.schema import ArrayOf, StructType

__all__ = ["Message", "make_message_classes"]

_RESERVED = {"unknown_tags", "to_dict", "from_dict"}


class Message:
    """Base of every generated class. Construct with keyword arguments; omitted fields take the
    spec's default. Equality compares every field (a records memoryview equals the same bytes)."""

    __slots__ = ("unknown_tags",)
    _struct: StructType
    _init_plan: tuple  # (name, default, factory) per field, in spec order
    _nested: dict  # field name -> (element class or None, is_array), for from_dict

    def __init__(self, **values: Any) -> None:
        for name, default, factory in self._init_plan:
            if name in values:
                setattr(self, name, values.pop(name))
            else:
                setattr(self, name, factory() if factory is not None else default)
        self.unknown_tags = values.pop("unknown_tags", None)
        if values:
            raise TypeError(f"{type(self).__qualname__} has no field(s) {sorted(values)}")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.unknown_tags == other.unknown_tags and all(
            getattr(self, name) == getattr(other, name) for name, _, _ in self._init_plan
        )

    __hash__ = None  # mutable

    def __repr__(self) -> str:
        parts = [f"{name}={_short_repr(getattr(self, name))}" for name, _, _ in self._init_plan]
        if self.unknown_tags:
            parts.append(f"unknown_tags={self.unknown_tags!r}")
        return f"{type(self).__qualname__}({', '.join(parts)})"

    def to_dict(self) -> dict:
        """Plain dicts and lists, records/bytes as ``bytes`` (for tests, logs and JSON)."""
        out = {name: _plain(getattr(self, name)) for name, _, _ in self._init_plan}
        if self.unknown_tags:
            out["unknown_tags"] = dict(self.unknown_tags)
        return out

    @classmethod
    def from_dict(cls, values: dict) -> "Message":
        """Build from a (possibly nested) dict; nested dicts become the nested classes."""
        converted = {}
        for name, value in values.items():
            element_class, is_array = cls._nested.get(name, (None, False))
            if element_class is not None and value is not None:
                if is_array:
                    value = [_coerce(element_class, item) for item in value]
                else:
                    value = _coerce(element_class, value)
            converted[name] = value
        return cls(**converted)


def _coerce(message_class: type, value: Any) -> Any:
    return message_class.from_dict(value) if isinstance(value, dict) else value


def _plain(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, (memoryview, bytearray)):
        return bytes(value)
    return value


def _short_repr(value: Any) -> str:
    if isinstance(value, memoryview):
        return f"<{value.nbytes} bytes>"
    return repr(value)


def make_message_classes(top: StructType) -> type:
    """Create the class of ``top`` and of every struct nested in it (depth first, so a nested
    class exists before a parent needs it for a default); return the top-level class."""
    nested: dict[str, type] = {}
    top_class = _make_class(top, top.name, nested)
    for name, nested_class in nested.items():
        setattr(top_class, name, nested_class)
    return top_class


def _make_class(stype: StructType, qualname: str, nested: dict[str, type]) -> type:
    for f in stype.fields:
        element = f.type.element if isinstance(f.type, ArrayOf) else f.type
        if isinstance(element, StructType):
            if element.name in nested:
                # Kafka's "commonStructs": one struct object under several fields is built once.
                assert nested[element.name]._struct is element, f"{qualname}: struct name {element.name} reused"
                continue
            top_name = qualname.split(".")[0]
            nested[element.name] = _make_class(element, f"{top_name}.{element.name}", nested)
    names = tuple(f.name for f in stype.fields)
    assert not _RESERVED & set(names), f"{stype.name}: field name collides with Message API"
    cls = type(stype.name, (Message,), {"__slots__": names, "__doc__": _doc(stype)})
    cls.__qualname__ = qualname
    cls.__module__ = "broker.wire.apis"
    cls._struct = stype
    stype.message_class = cls
    cls._init_plan = tuple((f.name, f.default, f.default_factory) for f in stype.fields)
    specialized = _specialized_init(cls)
    if specialized is not None:
        cls.__init__ = specialized
    cls._nested = {}
    for f in stype.fields:
        is_array = isinstance(f.type, ArrayOf)
        element = f.type.element if is_array else f.type
        if isinstance(element, StructType):
            cls._nested[f.name] = (element.message_class, is_array)
    return cls


_ABSENT = object()  # a keyword the caller did not pass (its field takes the default factory's value)


def _specialized_init(cls: type):
    """``Message.__init__`` written out for ``cls``'s fields (keyword-only, defaults bound):
    the generic loop over ``_init_plan`` with ``setattr`` and ``dict.pop`` was about a sixth of
    the group coordinator's CPU per OffsetCommit, which builds three messages for each answer.
    None when a field name is not a plain identifier (the generic one serves then)."""
    names = [name for name, _, _ in cls._init_plan]
    if not all(name.isidentifier() and not keyword.iskeyword(name) for name in names):
        return None
    scope: dict[str, Any] = {"_ABSENT": _ABSENT}
    params, body = [], []
    for i, (name, default, factory) in enumerate(cls._init_plan):
        if factory is not None:
            scope[f"_factory{i}"] = factory
            params.append(f"{name}=_ABSENT")
            body.append(f"    self.{name} = _factory{i}() if {name} is _ABSENT else {name}")
        else:
            scope[f"_default{i}"] = default
            params.append(f"{name}=_default{i}")
            body.append(f"    self.{name} = {name}")
    params.append("unknown_tags=None")
    body.append("    self.unknown_tags = unknown_tags")
    source = f"def __init__(self, *, {', '.join(params)}):\n" + "\n".join(body) + "\n"
    exec(compile(source, f"<broker.wire init {cls.__qualname__}>", "exec"), scope)  # noqa: S102
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    return init


def _doc(stype: StructType) -> str:
    lines = [f"Kafka struct {stype.name}. Fields (versions):"]
    for f in stype.fields:
        extra = f", nullable {f.nullable_versions}" if not f.nullable_versions.is_empty() else ""
        extra += f", tag {f.tag}" if f.tag is not None else ""
        lines.append(f"  {f.name}: {f.type!r} ({f.versions}{extra})")
    return "\n".join(lines)
