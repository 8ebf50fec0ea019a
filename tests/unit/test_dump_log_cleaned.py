"""``pylog dump-log`` on segments the cleaner wrote: gaps in offsets, the delete-horizon stamp
(KIP-534), empty batches and why they stay, and ``--print-records`` with the offsets that
survived."""

from __future__ import annotations

import io
import random
import re

from test_log_cleaner import CONFIG, Clock, clean, open_log, random_writes, read_all, write

from broker.tools.dump_log import dump_segment

SUMMARY = re.compile(r"^(\d+) batches(?: \((\d+) empty\))?, (\d+) records"
                     r"(?:, (\d+) offsets without a record \((\d+) between batches, (\d+) inside\))?, all CRCs valid$")


def cleaned_log(directory, clock):
    log = open_log(directory, clock)
    write(log, [(b"a", b"1"), (b"b", b"1")], batch=2, producer_id=5)  # superseded: kept empty for producer 5
    writes = random_writes(random.Random(7), 120, keys=12, tombstones=0.25)
    write(log, writes)
    write(log, [(b"a", b"2"), (b"b", b"2")], batch=2)
    log.roll()
    clean(log, clock, producer_last_offsets={5: 1})  # surviving tombstones get a delete horizon
    return log


def dump(path, print_records=False) -> list[str]:
    out = io.StringIO()
    assert dump_segment(str(path), out, print_records=print_records) == 0
    return out.getvalue().splitlines()


def test_a_cleaned_segment_dumps_its_gaps_horizons_and_empty_batches(tmp_path):
    clock = Clock()
    log = cleaned_log(tmp_path / "t-0", clock)
    expected = read_all(log)
    lines, records, next_base = [], [], None
    for segment in log.segments[:-1]:
        text = dump(segment.log_path, print_records=True)
        lines += text
        summary = SUMMARY.match(text[-1])
        assert summary, text[-1]
        count, without = int(summary[3]), int(summary[4] or 0)
        # every offset of the segment's span is either a record or counted as cleaned away
        assert count + without == segment.next_offset - segment.base_offset
        records += [int(m[1]) for m in (re.match(r"^\| offset: (\d+) ", line) for line in text) if m]
        assert next_base is None or segment.base_offset == next_base
        next_base = segment.next_offset
    assert records == [offset for offset, _, _ in expected]
    assert any(line.endswith("empty: kept for producer 5's sequence state") and " count: 0 " in line
               for line in lines)
    horizon = clock() + CONFIG.delete_retention_ms
    stamped = [line for line in lines if f" deleteHorizonMs: {horizon} (" in line]
    tombstones = sum(value is None for _, _, value in expected)
    assert tombstones and len(stamped) >= 1
    assert all(line.split(" baseTimestamp: ")[1].startswith("2023-11-14T22:13:21.00") for line in stamped)
    gaps = [re.match(r"^gap: offsets (\d+)\.\.(\d+) \((\d+)\) cleaned away$", line) for line in lines
            if line.startswith("gap:")]
    assert gaps and all(int(g[2]) - int(g[1]) + 1 == int(g[3]) for g in gaps)


def test_a_segment_never_cleaned_has_no_gaps_or_horizons(tmp_path):
    clock = Clock()
    log = open_log(tmp_path / "t-0", clock)
    write(log, random_writes(random.Random(8), 30, keys=5))
    log.roll()
    text = dump(log.segments[0].log_path)
    assert not [line for line in text if line.startswith("gap:") or "deleteHorizonMs" in line or "empty:" in line]
    assert SUMMARY.match(text[-1])[4] is None
