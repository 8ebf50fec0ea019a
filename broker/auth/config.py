"""The authorizer's broker settings, Kafka's names.

- ``authorizer.class.name``: empty (the default) means no authorization at all, as in Kafka. Any of
  Kafka's ACL authorizers' class names turns on pylog's (same model, same ZooKeeper layout):
  ``kafka.security.authorizer.AclAuthorizer``, ``kafka.security.auth.SimpleAclAuthorizer``,
  ``org.apache.kafka.metadata.authorizer.StandardAuthorizer``, or ``pylog.AclAuthorizer``.
- ``super.users``: ``User:admin;User:broker`` (semicolon-separated principals), allowed everything.
- ``allow.everyone.if.no.acl.found``: false by default (a resource without ACLs is closed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["AuthorizerConfig", "authorizer_from_properties", "AUTHORIZER_CLASS_NAMES"]

AUTHORIZER_CLASS_NAMES = frozenset({
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "pylog.AclAuthorizer",
})


@dataclass(frozen=True)
class AuthorizerConfig:
    class_name: str = ""
    super_users: tuple[str, ...] = ()
    allow_everyone_if_no_acl_found: bool = False

    @property
    def enabled(self) -> bool:
        return bool(self.class_name)


def authorizer_from_properties(get: Callable, error: type[Exception] = ValueError) -> AuthorizerConfig:
    """``get(key, parse(key, raw), default)`` is the broker config reader (it records the keys as
    known); ``error`` is the exception a bad value raises (the broker passes its ``ConfigError``)."""
    ConfigError = error  # noqa: N806  (the broker's class, under its name)

    def class_name(key: str, raw: str) -> str:
        if raw not in AUTHORIZER_CLASS_NAMES:
            raise ConfigError(f"{key}={raw!r}: pylog's ACL authorizer answers to "
                              f"{', '.join(sorted(AUTHORIZER_CLASS_NAMES))}")
        return raw

    def principals(key: str, raw: str) -> tuple[str, ...]:
        names = tuple(p.strip() for p in raw.split(";") if p.strip())
        for name in names:
            if ":" not in name:
                raise ConfigError(f"{key}: {name!r} is not a principal '<type>:<name>' (e.g. User:admin)")
        return names

    def boolean(key: str, raw: str) -> bool:
        if raw.lower() not in ("true", "false"):
            raise ConfigError(f"{key}={raw!r} is not true or false")
        return raw.lower() == "true"

    return AuthorizerConfig(
        class_name=get("authorizer.class.name", class_name, ""),
        super_users=get("super.users", principals, ()),
        allow_everyone_if_no_acl_found=get("allow.everyone.if.no.acl.found", boolean, False),
    )
