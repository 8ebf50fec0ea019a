"""Observability: Prometheus metrics, consumer lag and the status page (issue 19).

The room, by file:

- ``config``: ``metrics.*`` settings (``MetricsConfig``).
- ``requests``: per-request counters and latency histograms, bytes and records in/out per
  topic (``RequestMetrics.observe``, called once per request by the dispatcher).
- ``state``: the pure core: a plain-data snapshot of the broker (partitions, logs, groups and
  their lag, transactions) built from the services' in-memory state; the JSON of the status page.
- ``collector``: turns the latest snapshot into Prometheus metric families.
- ``service``: the asyncio shell: refreshes the snapshot every ``metrics.snapshot.interval.ms``,
  asks remote leaders for end offsets (lag), renders the exposition off the event loop.
- ``http``: a small asyncio HTTP server that only serves the bytes rendered last.
- ``status_page``: the self-contained HTML page.
- ``scrape_config``: the Prometheus scrape config ``pylog cluster scrape-config`` prints.

docs/metrics.md lists every metric with its Kafka name.
"""
