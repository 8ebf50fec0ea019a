"""``pylog produce`` and ``pylog consume``: Kafka's console producer and consumer.

``produce`` sends each line of stdin as one record (the line ending is not part of it); with
``--key-separator SEP`` the text before the first SEP is the key. Batches go out when full, and
whenever stdin has nothing more to read right now, so an interactive line is sent at once while
a piped file is batched. At the end every record is acknowledged or the command fails.

``consume`` prints each record's value on its own line (``null`` for a null value), or
``key<TAB>value`` with ``--print-key``. It starts at the end by default (only new records),
at the beginning with ``--from-beginning``, or at ``--offset N`` of ``--partition P``. It stops
after ``--max-messages`` records, or once no record arrived for ``--timeout-ms`` (Kafka's
meaning: an idle timeout), or at Ctrl-C; without either limit it runs until interrupted.
With ``--group G`` it is a member of consumer group G (``subscribe``, as Kafka's console consumer
with ``--group``): partitions come from the group, each starts at the group's committed offset
(``--from-beginning`` / the end only where the group has none), and what was printed is committed
(auto-commit, and on exit).

User mistakes raise ``ValueError`` with one line; ``pylog``'s main prints it and exits non-zero.
"""

from __future__ import annotations

import argparse
import select
from typing import BinaryIO, TextIO

from broker.client import SYSTEM_CLOCK, ClientConfig, Consumer, DeliveryFailed, KafkaError, Producer
from broker.client.producer import parse_acks
from broker.cluster.names import validate_topic_name

__all__ = ["add_produce_parser", "add_consume_parser", "run_produce", "run_consume", "format_record"]

_IDLE_POLL_MS = 1000


def add_produce_parser(subparsers) -> argparse.ArgumentParser:
    produce = subparsers.add_parser("produce", help="send lines of stdin as records")
    produce.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]")
    produce.add_argument("--topic", required=True)
    produce.add_argument("--key-separator", default=None, metavar="SEP",
                         help="split each line at the first SEP into key and value")
    produce.add_argument("--partition", type=int, default=None,
                         help="send every record to this partition (default: by key, or sticky)")
    produce.add_argument("--acks", default="all", choices=["all", "-1", "0", "1"],
                         help="all (-1, idempotent, default), 1 or 0")
    produce.add_argument("--compression", default="none", choices=["none", "gzip", "lz4"])
    produce.add_argument("--linger-ms", type=int, default=5)
    produce.add_argument("--timeout-ms", type=int, default=30_000, help="request timeout (default 30000)")
    return produce


def add_consume_parser(subparsers) -> argparse.ArgumentParser:
    consume = subparsers.add_parser("consume", help="print records of a topic")
    consume.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]")
    consume.add_argument("--topic", required=True)
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument("--offset", type=int, default=None, help="start at this offset (needs --partition)")
    consume.add_argument("--partition", type=int, default=None, help="only this partition (default: all)")
    consume.add_argument("--group", default=None, metavar="GROUP",
                         help="consume as a member of this consumer group (subscribe; commits offsets)")
    consume.add_argument("--max-messages", type=int, default=None, help="exit after this many records")
    consume.add_argument("--timeout-ms", type=int, default=None,
                         help="exit when no record arrived for this long")
    consume.add_argument("--print-key", action="store_true", help="print key<TAB>value")
    consume.add_argument("--isolation-level", default="read_uncommitted",
                         choices=["read_uncommitted", "read_committed"])
    return consume


# ------------------------------------------------------------------------------ produce


def run_produce(args: argparse.Namespace, stdin: BinaryIO, err: TextIO | None = None) -> int:
    validate_topic_name(args.topic)
    acks = parse_acks(args.acks)
    separator = args.key_separator.encode("utf-8") if args.key_separator else None
    if args.key_separator == "":
        raise ValueError("--key-separator must not be empty")
    if args.timeout_ms <= 0 or args.linger_ms < 0:
        raise ValueError("--timeout-ms must be positive and --linger-ms >= 0")
    try:
        producer = Producer(
            args.bootstrap_server,
            acks=acks,
            enable_idempotence=acks == -1,
            compression=args.compression,
            linger_ms=args.linger_ms,
            delivery_timeout_ms=2 * args.timeout_ms + args.linger_ms,
            config=ClientConfig(client_id="pylog-produce", request_timeout_ms=args.timeout_ms),
        )
    except KafkaError as exc:
        raise ValueError(str(exc)) from None
    try:
        try:
            count = _produce_lines(producer, args, stdin, separator)
        finally:
            producer.close()  # flushes what was sent, even after a bad line: acknowledged or raises
    except DeliveryFailed as exc:
        raise ValueError(f"{len(exc.failures)} record(s) not delivered: {exc}") from None
    except KafkaError as exc:
        raise ValueError(str(exc)) from None
    if err is not None:
        print(f"Produced {count} records to {args.topic}", file=err)
    return 0


def _produce_lines(producer: Producer, args, stdin: BinaryIO, separator: bytes | None) -> int:
    count = 0
    for number, line in enumerate(iter(stdin.readline, b""), start=1):
        line = _strip_line_ending(line)
        key = None
        if separator is not None:
            key, sep, line = line.partition(separator)
            if not sep:
                raise ValueError(f"line {number}: no key separator {args.key_separator!r} found")
        producer.send(args.topic, line, key=key, partition=args.partition)
        count += 1
        if _input_idle(stdin):
            producer.flush()  # interactive input: send now rather than at the next line
    return count


def _strip_line_ending(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return line[:-2]
    return line[:-1] if line.endswith(b"\n") else line


def _input_idle(stream) -> bool:
    """True when reading ``stream`` would block now (a terminal or a slow pipe)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False  # an in-memory stream never waits
    try:
        readable, _, _ = select.select([fd], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable


# ------------------------------------------------------------------------------ consume


def format_record(record, print_key: bool) -> bytes:
    value = b"null" if record.value is None else record.value
    if not print_key:
        return value + b"\n"
    key = b"null" if record.key is None else record.key
    return key + b"\t" + value + b"\n"


def run_consume(args: argparse.Namespace, out: BinaryIO, err: TextIO | None = None) -> int:
    validate_topic_name(args.topic)
    for option, value in (("--max-messages", args.max_messages), ("--timeout-ms", args.timeout_ms)):
        if value is not None and value <= 0:
            raise ValueError(f"{option} must be positive, got {value}")
    if args.offset is not None and args.partition is None:
        raise ValueError("--offset needs --partition")
    if args.offset is not None and args.offset < 0:
        raise ValueError(f"--offset must be >= 0, got {args.offset}")
    group = getattr(args, "group", None)
    if group is not None and (args.partition is not None or args.offset is not None):
        raise ValueError("--group takes its partitions from the group: not with --partition or --offset")
    try:
        consumer = Consumer(args.bootstrap_server, isolation_level=args.isolation_level,
                            auto_offset_reset="earliest" if args.from_beginning else "latest",
                            client_id="pylog-consume", group_id=group)
    except KafkaError as exc:
        raise ValueError(str(exc)) from None
    try:
        with consumer:
            _start(consumer, args)
            count = _consume(consumer, args, out)
    except KafkaError as exc:
        raise ValueError(str(exc)) from None
    except BrokenPipeError:
        return 0  # the reader went away (| head): nothing left to do
    if err is not None:
        print(f"Processed a total of {count} messages", file=err)
    return 0


def _start(consumer: Consumer, args) -> None:
    if getattr(args, "group", None) is not None:
        consumer.partitions_for(args.topic)  # an unknown topic fails here, as without --group
        consumer.subscribe([args.topic])
        return
    partitions = consumer.partitions_for(args.topic)
    if args.partition is not None:
        if args.partition not in partitions:
            raise ValueError(f"topic {args.topic!r} has no partition {args.partition} "
                             f"({len(partitions)} partitions)")
        partitions = [args.partition]
    tps = [(args.topic, p) for p in partitions]
    consumer.assign(tps)
    if args.offset is not None:
        consumer.seek(tps[0], args.offset)
    elif args.from_beginning:
        consumer.seek_to_beginning()
    else:
        consumer.seek_to_end()


def _consume(consumer: Consumer, args, out: BinaryIO, clock=SYSTEM_CLOCK) -> int:
    count = 0
    idle_since = clock.monotonic_ms()
    while args.max_messages is None or count < args.max_messages:
        wait = _IDLE_POLL_MS
        if args.timeout_ms is not None:
            wait = max(0, min(wait, args.timeout_ms - (clock.monotonic_ms() - idle_since)))
        limit = 500 if args.max_messages is None else min(500, args.max_messages - count)
        records = consumer.poll(timeout_ms=wait, max_records=limit)
        if records:
            out.write(b"".join(format_record(r, args.print_key) for r in records))
            out.flush()
            count += len(records)
            idle_since = clock.monotonic_ms()
        elif args.timeout_ms is not None and clock.monotonic_ms() - idle_since >= args.timeout_ms:
            break
    return count
