"""``metrics.*``: where the metrics and status endpoint listens and how often it refreshes."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MetricsConfig"]


@dataclass(frozen=True)
class MetricsConfig:
    # metrics.port: the HTTP port of /metrics and the status page; 0 = no endpoint (the default,
    # as a Kafka broker exposes nothing over HTTP unless a JMX exporter is added).
    port: int = 0
    # metrics.host: the address to bind; the default is loopback, so nothing is exposed to the
    # network unless asked for.
    host: str = "127.0.0.1"
    # metrics.snapshot.interval.ms: how often the broker state is snapshotted and the exposition
    # rendered; a scrape in between gets the last rendering (never computed on the request path).
    snapshot_interval_ms: int = 5_000
    # metrics.lag.interval.ms: how often end offsets of partitions led by other brokers are asked
    # for (ListOffsets), for the consumer lag of the groups this broker coordinates.
    lag_interval_ms: int = 5_000

    @property
    def enabled(self) -> bool:
        return self.port != 0
