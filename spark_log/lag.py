"""Consumer lag of a pylog streaming query, from what Spark reports (``query.lastProgress``).

Spark 4.3's Python DataSource API has no custom source metrics (``sources[].metrics`` stays
``{}``: docs/metrics.md, shared reference T4), so the Kafka source's ``minOffsetsBehindLatest`` /
``maxOffsetsBehindLatest`` / ``avgOffsetsBehindLatest`` cannot be reported as metrics. What the
progress does carry: ``endOffset`` (where the batch ended) and ``latestOffset`` (the source's
``reportLatestOffset``: the newest offsets it saw). Their difference per partition is the lag;
``progress_lag`` computes it and the same three summaries, named as the Kafka source names them.

Outside Spark, with ``kafka.group.id`` and ``offsets.store=kafka`` the query commits each batch's
end offsets to ``__consumer_offsets``: the group coordinator's ``kafka_consumergroup_lag``
metric and status page, and ``pylog groups describe``, show the query's lag like any group's.
"""

from __future__ import annotations

import json
from typing import Mapping

__all__ = ["progress_lag"]


def _offsets(value) -> dict:
    if value is None:
        return {}
    return json.loads(value) if isinstance(value, str) else dict(value)


def progress_lag(progress: Mapping, source_index: int = 0) -> dict:
    """``{"partitions": {(topic, partition): lag}, "minOffsetsBehindLatest": ...,
    "maxOffsetsBehindLatest": ..., "avgOffsetsBehindLatest": ...}`` for one source of a progress
    report (a ``StreamingQueryProgress`` as a dict); empty summaries before the first batch."""
    source = progress["sources"][source_index]
    end, latest = _offsets(source.get("endOffset")), _offsets(source.get("latestOffset"))
    lags = {}
    for topic, partitions in latest.items():
        for partition, newest in partitions.items():
            done = end.get(topic, {}).get(partition)
            if done is not None:
                lags[(topic, int(partition))] = max(0, int(newest) - int(done))
    values = list(lags.values())
    return {"partitions": lags,
            "minOffsetsBehindLatest": min(values) if values else None,
            "maxOffsetsBehindLatest": max(values) if values else None,
            "avgOffsetsBehindLatest": sum(values) / len(values) if values else None}
