"""Client quotas (issue 18 item 3): the pure core. Kafka's ``ClientQuotaManager`` for the
produce and fetch byte rates, without its metrics registry.

Quotas live on entities, as Kafka's ZooKeeper mode stores them (``/config/users/<user>``,
``/config/users/<user>/clients/<client-id>``, ``/config/clients/<client-id>``, ``<default>`` for
either name). A request's (user, client id) takes the first quota found in Kafka's order:

    users/<u>/clients/<c>, users/<u>/clients/<default>, users/<u>,
    users/<default>/clients/<c>, users/<default>/clients/<default>, users/<default>,
    clients/<c>, clients/<default>

and the bytes are counted in one rate per *matched* level, as Kafka tags its sensors: a quota on
``users/alice`` is shared by all of alice's client ids; a ``<default>`` quota gives each user (or
client id) its own rate. The rate is Kafka's ``Rate`` over ``quota.window.num`` samples of
``quota.window.size.seconds`` each; on violation the throttle is Kafka's
``(rate - quota) / quota * window`` (not capped, as Kafka's byte-rate quotas), so that after the
throttle the rate is back at the quota.

Per request: one dict lookup for the resolution (cached until the next config change), one for
the rate, and a few additions. No per-record work.
"""

from __future__ import annotations

import functools
import urllib.parse
from dataclasses import dataclass, field
from typing import Mapping

__all__ = ["DEFAULT", "QUOTA_KEYS", "PRODUCE", "FETCH", "QuotaSettings", "Rate", "ClientQuotas",
           "sanitize", "sanitize_cached", "validate_quota"]

DEFAULT = "<default>"  # Kafka's ZooKeeper name of the default user / client id
PRODUCE = "producer_byte_rate"
FETCH = "consumer_byte_rate"
REQUEST = "request_percentage"  # percent of the broker's handler time (quota_gate.py)
QUOTA_KEYS = (PRODUCE, FETCH, REQUEST)


@dataclass(frozen=True)
class QuotaSettings:
    """Kafka's ``quota.window.num`` (samples) and ``quota.window.size.seconds`` (each)."""
    window_num: int = 11
    window_size_ms: int = 1000


def sanitize(name: str) -> str:
    """Kafka's ``Sanitizer.sanitize``: the znode name of a user or client id (URL-encoded; ``*``
    and ``~`` encoded too, as Java's URLEncoder)."""
    return urllib.parse.quote(name, safe="-_.").replace("~", "%7E")


@functools.lru_cache(maxsize=4096)
def sanitize_cached(name: str) -> str:
    """``sanitize`` for the per-request path (a handful of distinct names per broker)."""
    return sanitize(name)


def validate_quota(key: str, value: str) -> float:
    """The value of one quota key, or ValueError with Kafka's message (its ``validate`` in
    ``ClientQuotaControlManager``/``AdminZkClient``): known key, a number, positive."""
    if key not in QUOTA_KEYS:
        raise ValueError(f"Unknown quota key {key}")  # noqa: not a config of this entity
    try:
        number = float(value)
    except ValueError:
        raise ValueError(f"Invalid value {value} for configuration {key}") from None
    if number <= 0:
        raise ValueError(f"Quota {key} must be greater than 0")  # Kafka 4.1's words
    if key != REQUEST and number != int(number):
        raise ValueError(f"Invalid value {value} for configuration {key}: Value must be an integer")
    return number


class Rate:
    """Kafka's sampled ``Rate``: ``samples`` windows of ``window_ms`` each; the oldest is reused
    when a new window starts. ``measure`` divides the total by the elapsed time, padded to at
    least ``samples - 1`` full windows (so a first burst is not divided by a few ms)."""

    __slots__ = ("_starts", "_values", "_current", "_samples", "_window_ms")

    def __init__(self, samples: int, window_ms: int, now_ms: float) -> None:
        self._samples, self._window_ms = samples, window_ms
        self._starts = [now_ms] + [None] * (samples - 1)
        self._values = [0.0] * samples
        self._current = 0

    def record(self, value: float, now_ms: float) -> None:
        index = self._current
        start = self._starts[index]
        if start is None or now_ms >= start + self._window_ms:  # None: purged after an idle spell
            index = self._current = (index + 1) % self._samples
            self._starts[index], self._values[index] = now_ms, 0.0
        self._values[index] += value

    def _purge(self, now_ms: float) -> None:
        """Samples older than the whole window count no more (Kafka's ``purgeObsoleteSamples``)."""
        horizon = self._samples * self._window_ms
        for i, start in enumerate(self._starts):
            if start is not None and now_ms - start >= horizon:
                self._starts[i], self._values[i] = None, 0.0

    def window_ms(self, now_ms: float) -> float:
        """Kafka's ``Rate.windowSize``: the time since the oldest sample, plus the full windows
        missing to ``samples - 1`` of them."""
        oldest = min((s for s in self._starts if s is not None), default=now_ms)
        elapsed = now_ms - oldest
        missing = self._samples - 1 - int(elapsed // self._window_ms)
        return (elapsed + max(missing, 0) * self._window_ms) or 1.0

    def measure(self, now_ms: float) -> float:
        """Units per second."""
        self._purge(now_ms)
        return sum(self._values) / self.window_ms(now_ms) * 1000


@dataclass
class ClientQuotas:
    """Every quota entity's values and the rates of the (user, client id) pairs that used one.
    ``entities``: ``(user or None, client or None) -> {key: value}``, names sanitized as in
    ZooKeeper, ``DEFAULT`` for the default."""
    settings: QuotaSettings = field(default_factory=QuotaSettings)
    entities: dict = field(default_factory=dict)
    _resolved: dict = field(default_factory=dict)  # (key, user, client) -> (quota, rate key) | None
    _rates: dict = field(default_factory=dict)  # (key, rate user, rate client) -> Rate

    @property
    def active(self) -> bool:
        return bool(self.entities)

    def set_entity(self, user: str | None, client: str | None, config: Mapping[str, str]) -> None:
        """Replace one entity's quotas (an empty config removes it). Keys that are not quotas
        (SCRAM credentials share ``/config/users``) and unparsable values are ignored."""
        values = {}
        for key in QUOTA_KEYS:
            if key in config:
                try:
                    values[key] = validate_quota(key, config[key])
                except ValueError:
                    pass
        if values == self.entities.get((user, client), {}):
            return  # e.g. a SCRAM credential changed next to the quotas: the rates go on
        if values:
            self.entities[(user, client)] = values
        else:
            self.entities.pop((user, client), None)
        self._resolved.clear()
        self._rates.clear()  # a new quota starts a fresh rate (Kafka re-creates the sensor)

    def resolve(self, key: str, user: str, client: str) -> tuple[float, tuple] | None:
        """The quota and rate key for (sanitized) ``user``/``client`` in Kafka's order, or None."""
        cache_key = (key, user, client)
        try:
            return self._resolved[cache_key]
        except KeyError:
            pass
        found = None
        entities = self.entities
        for u, c, rate_key in ((user, client, (user, client)), (user, DEFAULT, (user, client)),
                               (user, None, (user, "")), (DEFAULT, client, (user, client)),
                               (DEFAULT, DEFAULT, (user, client)), (DEFAULT, None, (user, "")),
                               (None, client, ("", client)), (None, DEFAULT, ("", client))):
            values = entities.get((u, c))
            if values is not None and key in values:
                found = (values[key], (key,) + rate_key)
                break
        self._resolved[cache_key] = found
        return found

    def window_bytes(self, key: str, user: str, client: str) -> int | None:
        """The most one response may carry (Kafka's ``getMaxValueInQuotaWindow``): what the quota
        allows over the measured window, so a fetch bigger than that cannot be throttled forever
        (a throttled fetch is answered empty)."""
        resolved = self.resolve(key, user, client)
        if resolved is None:
            return None
        settings = self.settings
        return max(int(resolved[0] * max(settings.window_num - 1, 1) * settings.window_size_ms / 1000), 1)

    def record(self, key: str, user: str, client: str, amount: float, now_ms: float) -> int:
        """Count ``amount`` against the pair's quota; the throttle in ms (0: within quota)."""
        resolved = self.resolve(key, user, client)
        if resolved is None:
            return 0
        quota, rate_key = resolved
        rate = self._rates.get(rate_key)
        if rate is None:
            rate = self._rates[rate_key] = Rate(self.settings.window_num, self.settings.window_size_ms, now_ms)
        rate.record(amount, now_ms)
        observed = rate.measure(now_ms)
        if observed <= quota:
            return 0
        window = rate.window_ms(now_ms)
        return int((observed - quota) / quota * window)  # no cap for byte rates, as Kafka

    def unrecord(self, key: str, user: str, client: str, amount: float, now_ms: float) -> None:
        """Take back a throttled fetch's bytes: Kafka sends it empty and does not count it."""
        resolved = self.resolve(key, user, client)
        if resolved is not None and (rate := self._rates.get(resolved[1])) is not None:
            rate.record(-amount, now_ms)
