"""A ready Prometheus scrape config for a pylog cluster (``pylog cluster scrape-config``).

``pylog cluster up --set metrics.port=P`` gives broker i the metrics port P + i (as its Kafka
port is ``--port`` + i); this prints one static target per broker, labelled with the broker id
and the cluster directory's name, for Prometheus' ``scrape_configs``.
"""

from __future__ import annotations

__all__ = ["metrics_port", "scrape_config"]

DEFAULT_SCRAPE_INTERVAL_S = 15  # Prometheus' own default


def metrics_port(base: int, broker_id: int) -> int:
    """Broker ``broker_id``'s metrics port when the cluster's ``metrics.port`` is ``base``."""
    return base + broker_id if base else 0


def scrape_config(cluster: str, host: str, base_port: int, broker_ids: list[int],
                  interval_s: int = DEFAULT_SCRAPE_INTERVAL_S) -> str:
    """YAML (written out, no YAML library needed) with one ``pylog`` job."""
    lines = [f"# Prometheus scrape config for pylog cluster {cluster!r}: paste under scrape_configs",
             "scrape_configs:",
             "  - job_name: pylog",
             f"    scrape_interval: {interval_s}s",
             "    metrics_path: /metrics",
             "    static_configs:"]
    for broker_id in broker_ids:
        lines += [f"      - targets: ['{host}:{metrics_port(base_port, broker_id)}']",
                  "        labels:",
                  f"          cluster: '{cluster}'",
                  f"          broker: '{broker_id}'"]
    return "\n".join(lines) + "\n"
