"""The pure half of ``pylog groups``: reset plans, describe rows and the tables, as Kafka's
``kafka-consumer-groups`` (``ConsumerGroupCommand``) computes and prints them. No I/O here: the
command (``broker.tools.groups``) asks the cluster and the stores, these functions decide.

Reset plans (``--reset-offsets``), per partition:

- ``--to-earliest`` / ``--to-latest``: the log start / log end offset.
- ``--to-offset N`` and ``--shift-by N`` (committed + N, which needs a committed offset): clamped
  into [log start, log end], as Kafka's ``checkOffsetsRange`` does (with a warning each).
- ``--to-datetime`` / ``--by-duration``: the first offset whose timestamp is >= the time (ListOffsets
  by timestamp); a partition with no such record falls back to its log end, with Kafka's warning.

Tables are aligned columns under Kafka's headings, two spaces apart; ``-`` where Kafka prints
``-`` (no committed offset, no log end, a partition no member owns).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Iterable, Mapping, Sequence

__all__ = [
    "ResetSpec", "ResetPlan", "GroupRow", "MemberRow",
    "parse_datetime_ms", "parse_duration_ms", "parse_topic_partitions", "plan_reset",
    "offset_rows", "committed_rows", "member_rows", "format_table", "describe_table", "members_table",
    "reset_table",
    "DESCRIBE_COLUMNS", "RESET_COLUMNS",
]

TopicPartition = tuple[str, int]
DESCRIBE_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
                    "CONSUMER-ID", "HOST", "CLIENT-ID")
RESET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")
RESET_KINDS = ("earliest", "latest", "offset", "shift", "timestamp")
_MISSING = "-"

# Java's Duration.parse: optional sign, "P", days, then "T" hours/minutes/seconds (fractional).
_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?(?:T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE)


@dataclass(frozen=True)
class ResetSpec:
    """What ``--reset-offsets`` was asked: ``kind`` in RESET_KINDS; ``value`` the offset, the
    shift, or the timestamp in ms (``--to-datetime`` and ``--by-duration`` both resolve to it)."""

    kind: str
    value: int = 0

    def __post_init__(self) -> None:
        assert self.kind in RESET_KINDS, self.kind


@dataclass(frozen=True)
class ResetPlan:
    offsets: dict[TopicPartition, int]  # the new committed offset per partition, sorted
    warnings: tuple[str, ...]  # Kafka's warnings (clamped offsets, empty partitions)


@dataclass(frozen=True)
class GroupRow:
    """One row of ``describe``: a partition with a committed offset or an owner (or both)."""

    group: str
    topic: str
    partition: int
    committed: int | None  # None: no committed offset
    log_end: int | None  # None: not asked, or the partition is gone
    consumer_id: str | None = None  # None: no member owns the partition
    host: str | None = None
    client_id: str | None = None
    store: str | None = None  # "kafka" / "zookeeper" when both stores are shown

    @property
    def lag(self) -> int | None:
        """log end - committed; never negative (a committed offset past the log end, after a
        topic was re-created, shows no lag rather than a negative one)."""
        if self.log_end is None or self.committed is None:
            return None
        return max(self.log_end - self.committed, 0)


@dataclass(frozen=True)
class MemberRow:
    group: str
    consumer_id: str
    group_instance_id: str | None
    host: str
    client_id: str
    assignment: tuple[TopicPartition, ...]


# ---------------------------------------------------------------------- parsing

def parse_datetime_ms(text: str) -> int:
    """``--to-datetime``: Kafka's ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone (``Z``,
    ``+01:00``, ``-0500``); without one it is UTC, as in Kafka's ``Utils.getDateTime``. The
    milliseconds may be left out (Kafka requires them)."""
    value = text.strip()
    if "T" not in value:
        raise ValueError(f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss (ISO 8601, with a 'T')")
    date_part, _, time_part = value.partition("T")
    if not any(sign in time_part for sign in "+-Zz"):
        value += "+00:00"
    value = re.sub(r"[Zz]$", "+00:00", value)
    value = re.sub(r"([+-]\d\d)(\d\d)$", r"\1:\2", value)
    value = re.sub(r"([+-]\d\d)$", r"\1:00", value)
    for pattern in ("%Y-%m-%dT%H:%M:%S.%f%z", "%Y-%m-%dT%H:%M:%S%z"):
        try:
            parsed = datetime.strptime(value, pattern)
        except ValueError:
            continue
        return int(parsed.astimezone(timezone.utc).timestamp() * 1000)
    raise ValueError(f"--to-datetime {text!r}: expected YYYY-MM-DDTHH:mm:SS.sss[zone], e.g. 2024-01-31T08:00:00.000")


def parse_duration_ms(text: str) -> int:
    """``--by-duration``: an ISO 8601 duration as Java's ``Duration.parse`` reads it
    (``PnDTnHnMn.nS``, e.g. ``PT15M``, ``P1DT2H``), in ms. Must be positive: the reset goes to
    now minus it."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.group(i) for i in range(2, 6)):
        raise ValueError(f"--by-duration {text!r}: expected an ISO 8601 duration PnDTnHnMnS, e.g. PT30M or P1D")
    sign, days, hours, minutes, seconds, fraction = match.groups()
    ms = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000 + int(seconds or 0) * 1000
    if fraction:
        ms += int(fraction.ljust(3, "0")[:3]) * (-1 if (seconds or "").startswith("-") else 1)
    ms = -ms if sign == "-" else ms
    if ms <= 0:
        raise ValueError(f"--by-duration {text!r}: must be a positive duration")
    return ms


def parse_topic_partitions(args: Sequence[str]) -> tuple[list[str], list[TopicPartition]]:
    """``--topic`` values: ``orders`` (every partition) or ``orders:0,2`` (those). Returns the
    whole topics and the explicit partitions."""
    topics: list[str] = []
    partitions: list[TopicPartition] = []
    for arg in args:
        if ":" not in arg:
            topics.append(arg)
            continue
        topic, _, listed = arg.partition(":")
        if not topic or not listed or ":" in listed:
            raise ValueError(f"invalid topic arg {arg!r}: expected TOPIC or TOPIC:PARTITION[,PARTITION]")
        for item in listed.split(","):
            if not item.strip().isdigit():
                raise ValueError(f"invalid partition {item!r} in topic arg {arg!r}")
            partitions.append((topic, int(item)))
    return topics, partitions


# ---------------------------------------------------------------------- planning

def plan_reset(partitions: Iterable[TopicPartition], spec: ResetSpec,
               committed: Mapping[TopicPartition, int], log_starts: Mapping[TopicPartition, int],
               log_ends: Mapping[TopicPartition, int],
               by_timestamp: Mapping[TopicPartition, int] | None = None) -> ResetPlan:
    """The new offset of each partition. ``by_timestamp`` (for kind ``timestamp``) holds
    ListOffsets' answer per partition, -1 when no record is that recent. Raises ValueError for
    a partition the cluster has no offsets for, or a shift without a committed offset."""
    wanted = sorted(set(partitions))
    warnings: list[str] = []
    for tp in wanted:
        if tp not in log_ends or tp not in log_starts:
            raise ValueError(f"partition {tp[0]}-{tp[1]} does not exist (no log start or end offset)")
    out: dict[TopicPartition, int] = {}
    for tp in wanted:
        if spec.kind == "earliest":
            out[tp] = log_starts[tp]
        elif spec.kind == "latest":
            out[tp] = log_ends[tp]
        elif spec.kind == "timestamp":
            found = (by_timestamp or {}).get(tp, -1)
            if found < 0:
                warnings.append(f"Warn: Partition {tp[1]} from topic {tp[0]} is empty. "
                                f"Falling back to latest known offset.")
                found = log_ends[tp]
            out[tp] = found
        else:
            if spec.kind == "shift" and tp not in committed:
                raise ValueError(f"Cannot shift offset for partition {tp[0]}-{tp[1]} since there is "
                                 f"no current committed offset")
            requested = spec.value if spec.kind == "offset" else committed[tp] + spec.value
            out[tp] = _clamp(tp, requested, log_starts[tp], log_ends[tp], warnings)
    return ResetPlan(out, tuple(warnings))


def _clamp(tp: TopicPartition, offset: int, start: int, end: int, warnings: list[str]) -> int:
    if offset > end:
        warnings.append(f"New offset ({offset}) is higher than latest offset for topic partition "
                        f"{tp[0]}-{tp[1]}. Value will be set to {end}")
        return end
    if offset < start:
        warnings.append(f"New offset ({offset}) is lower than earliest offset for topic partition "
                        f"{tp[0]}-{tp[1]}. Value will be set to {start}")
        return start
    return offset


# ---------------------------------------------------------------------- describe rows

def offset_rows(group: str, members: Sequence[MemberRow], committed: Mapping[TopicPartition, int],
                log_ends: Mapping[TopicPartition, int] | None, store: str | None = None) -> list[GroupRow]:
    """Kafka's ``describe`` rows: members that own partitions, the one with most first, each
    member's partitions by partition number (Kafka 4.1's tool prints them in a hash map's
    order; the rows are the same); then the committed partitions no member owns, by
    topic and partition, with ``-`` for the member columns."""
    ends = log_ends or {}
    rows: list[GroupRow] = []
    owned: set[TopicPartition] = set()
    owners = sorted((m for m in members if m.assignment), key=lambda m: -len(m.assignment))
    for m in owners:
        for tp in sorted(m.assignment, key=lambda tp: (tp[1], tp[0])):
            owned.add(tp)
            rows.append(GroupRow(group, tp[0], tp[1], committed.get(tp), ends.get(tp),
                                 m.consumer_id, m.host, m.client_id, store))
    for tp in sorted(set(committed) - owned):
        rows.append(GroupRow(group, tp[0], tp[1], committed[tp], ends.get(tp), store=store))
    return rows


def committed_rows(group: str, committed: Mapping[TopicPartition, int],
                   log_ends: Mapping[TopicPartition, int] | None, store: str | None = None) -> list[GroupRow]:
    """Rows of a store without members (ZooKeeper): one per committed partition, sorted."""
    return offset_rows(group, (), committed, log_ends, store)


def member_rows(group: str, members: Iterable) -> list[MemberRow]:
    """``MemberRow`` per ``group_admin.MemberDescription``, in the coordinator's order."""
    return [MemberRow(group, m.member_id, m.group_instance_id, m.client_host, m.client_id, tuple(m.assignment))
            for m in members]


# ---------------------------------------------------------------------- tables

def format_table(headings: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Aligned columns, two spaces apart, trailing blanks stripped; None prints as ``-``."""
    table = [list(headings)] + [[_MISSING if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(headings))]
    return "".join("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip() + "\n" for line in table)


def describe_table(rows: Sequence[GroupRow], with_store: bool = False, with_members: bool = True) -> str:
    """Kafka's describe columns; without members (only the ZooKeeper store, which has none)
    the first six; STORE last when rows come from both stores."""
    width = len(DESCRIBE_COLUMNS) if with_members else 6
    headings = DESCRIBE_COLUMNS[:width] + (("STORE",) if with_store else ())
    return format_table(headings, [
        (r.group, r.topic, r.partition, r.committed, r.log_end, r.lag, r.consumer_id, r.host, r.client_id)[:width]
        + ((r.store,) if with_store else ()) for r in rows])


def members_table(rows: Sequence[MemberRow], verbose: bool = False) -> str:
    """``--members``: GROUP-INSTANCE-ID only when a member has one; ``--verbose`` adds
    ASSIGNMENT as Kafka 4.1 prints it: ``orders:0,1;other:2``."""
    instance = any(r.group_instance_id for r in rows)
    headings = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if instance else []) + \
        ["HOST", "CLIENT-ID", "#PARTITIONS"] + (["ASSIGNMENT"] if verbose else [])
    lines = []
    for r in rows:
        line = [r.group, r.consumer_id] + ([r.group_instance_id or ""] if instance else []) + \
            [r.host, r.client_id, len(r.assignment)]
        if verbose:
            line.append(_assignment_text(r.assignment))
        lines.append(line)
    return format_table(headings, lines)


def _assignment_text(assignment: Sequence[TopicPartition]) -> str:
    if not assignment:
        return _MISSING
    by_topic: dict[str, list[int]] = {}
    for topic, partition in assignment:
        by_topic.setdefault(topic, []).append(partition)
    return ";".join(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in sorted(by_topic.items()))


def reset_table(group: str, offsets: Mapping[TopicPartition, int]) -> str:
    return format_table(RESET_COLUMNS, [(group, t, p, off) for (t, p), off in sorted(offsets.items())])
