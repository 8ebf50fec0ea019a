"""``ApiSpec``: one Kafka API (request and response) across all the versions the codec covers.

An API module in ``broker.wire.apis`` calls ``api(...)`` once with the request and response field
lists; this builds and checks the spec and generates the message classes. The checks are
assertions because a bad spec is our bug, found at import time, never the peer's.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.wire.message import make_message_classes
from broker.wire.schema import ArrayOf, Field, StructType, Versions, struct

__all__ = ["ApiSpec", "api"]


@dataclass(eq=False)
class ApiSpec:
    """``valid`` is the version range the codec can encode and decode; ``flexible`` the versions
    that use compact encodings and tagged fields (KIP-482). A flexible range is open-ended in
    Kafka ("9+"), which is what lets a header be parsed for a version newer than ``valid``."""

    key: int
    name: str
    valid: Versions
    flexible: Versions
    request: StructType
    response: StructType

    @property
    def request_class(self) -> type:
        return self.request.message_class

    @property
    def response_class(self) -> type:
        return self.response.message_class

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible


def api(
    key: int,
    name: str,
    *,
    valid: str,
    flexible: str,
    request: list[Field],
    response: list[Field],
) -> ApiSpec:
    spec = ApiSpec(
        key=key,
        name=name,
        valid=Versions.parse(valid),
        flexible=Versions.parse(flexible),
        request=struct(f"{name}Request", *request),
        response=struct(f"{name}Response", *response),
    )
    for body in (spec.request, spec.response):
        _check_struct(body, spec)
        make_message_classes(body)
    return spec


def _check_struct(stype: StructType, spec: ApiSpec) -> None:
    tags_seen: dict[int, str] = {}
    for f in stype.fields:
        assert spec.flexible.covers(f.tagged_versions), (
            f"{stype.name}.{f.name}: tagged when not flexible"
        )
        if f.tag is not None:
            other = tags_seen.setdefault(f.tag, f.name)
            assert other == f.name, f"{stype.name}: tag {f.tag} used by {other} and {f.name}"
        element = f.type.element if isinstance(f.type, ArrayOf) else f.type
        if isinstance(element, StructType):
            # KIP-893 nullable structs carry an int8 presence prefix (codec.py); a nullable
            # array of structs is an ordinary nullable array.
            _check_struct(element, spec)
