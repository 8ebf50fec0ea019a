"""Option values: the error every option check raises and the parsers of one value. Pure.

A leaf module: ``spark_log.options`` (the source and sink options) and
``spark_log.client_options`` (the ``kafka.*`` client options) both parse with these, and neither
may import the other's half. ``OptionError`` and ``parse_duration_ms`` are also importable from
``spark_log.options``.
"""

from __future__ import annotations

import re
from typing import Mapping

__all__ = ["OptionError", "INT32_MAX", "INT64_MAX", "lower_keys", "bool_option", "int_option",
           "or_default", "parse_duration_ms"]

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


class OptionError(ValueError):
    """A wrong or conflicting option. The message names the option and what is valid."""


def lower_keys(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}


def bool_option(opts: dict, name: str, default: bool) -> bool:
    text = opts.get(name.lower())
    if text is None:
        return default
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise OptionError(f"Option '{name}' must be 'true' or 'false', got {text!r}")
    return value == "true"


def int_option(opts: dict, name: str, *, minimum: int = 1, maximum: int = INT64_MAX) -> int | None:
    text = opts.get(name.lower())
    if text is None:
        return None
    try:
        value = int(text.strip())
    except ValueError:
        value = None
    if value is None or not minimum <= value <= maximum:
        what = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise OptionError(f"Option '{name}' must be {what}, got {text!r}")
    return value


def or_default(value: int | None, default: int) -> int:
    return default if value is None else value


_DURATION = re.compile(r"^(-?[0-9]+)\s*([a-z]*)$")
_DURATION_UNITS_MS = {"": 1, "ms": 1, "us": 0.001, "s": 1000, "m": 60_000, "min": 60_000,
                      "h": 3_600_000, "d": 86_400_000}


def parse_duration_ms(name: str, text: str) -> int:
    """Spark's ``timeStringAsMs``: ``"15m"``, ``"30s"``, ``"100ms"``, ``"2h"``, a bare number is ms."""
    match = _DURATION.match(text.strip().lower())
    if not match or match.group(2) not in _DURATION_UNITS_MS or int(match.group(1)) < 0:
        raise OptionError(f"Option '{name}' must be a duration like '15m', '30s' or '500ms' "
                          f"(units us, ms, s, m, min, h, d), got {text!r}")
    return int(int(match.group(1)) * _DURATION_UNITS_MS[match.group(2)])
