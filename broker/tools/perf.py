"""``pylog perf produce|consume|e2e``: Kafka's ``kafka-producer-perf-test``,
``kafka-consumer-perf-test`` and ``EndToEndLatency``, with their flag names.

    pylog perf produce --bootstrap-server H:P --topic T --num-records 1000000 --record-size 100 \\
        --throughput -1 --producer-props acks=1 linger.ms=5 batch.size=1048576
    pylog perf consume --bootstrap-server H:P --topic T --messages 1000000
    pylog perf e2e --bootstrap-server H:P --topic T --num-records 20000 --throughput 10000

Every mode prints Kafka-style summary lines on stdout (``--json``: one JSON line instead, with
``records_per_sec``, ``mb_per_sec`` and ``latency_ms`` {avg, p50, p95, p99, p99_9, max});
``--runs N`` repeats the measurement and reports min/median/max; a progress bar goes to stderr
when it is a terminal (or with ``--progress``); ``--plot FILE.png`` draws the latency histogram
and the throughput over time of the last run (matplotlib).

Convenience flags (``--acks``, ``--compression-type``) override ``--producer-props``;
``--partitions`` creates the topic when it does not exist. The produce path is the Arrow one
(``Producer.send_arrow``) unless ``--api record`` asks for one ``send`` per record. Client
defaults are Kafka's (acks=all, idempotent, batch.size 16384, linger.ms 5): pass the
properties you want to measure.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from broker.client import AdminClient, KafkaError
from broker.client.properties import consumer_options_from_properties, producer_options_from_properties
from broker.cluster.names import validate_topic_name
from broker.tools.perf_runs import (
    ConsumeOptions,
    E2EOptions,
    ProduceOptions,
    run_consume,
    run_e2e,
    run_produce,
)
from broker.tools.perf_stats import Progress, RunResult, summarize_runs

__all__ = ["add_perf_parser", "run_perf", "parse_properties", "main"]


def add_perf_parser(subparsers) -> argparse.ArgumentParser:
    """``pylog perf`` under ``pylog``'s subcommands (``broker/cli.py``)."""
    perf = subparsers.add_parser("perf", help="measure produce, consume and end-to-end latency")
    _add_modes(perf)
    return perf


def main(argv: list[str] | None = None) -> int:
    """``python -m broker.tools.perf MODE ...``: the same as ``pylog perf MODE ...``."""
    parser = argparse.ArgumentParser(prog="pylog perf", description=__doc__.split("\n\n")[0])
    _add_modes(parser)
    args = parser.parse_args(argv)
    try:
        return run_perf(args, sys.stdout, sys.stderr)
    except ValueError as exc:
        print(f"pylog perf: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


def _add_modes(perf: argparse.ArgumentParser) -> None:
    modes = perf.add_subparsers(dest="perf_mode", required=True, metavar="MODE")
    produce = modes.add_parser("produce", help="kafka-producer-perf-test")
    _common(produce)
    produce.add_argument("--num-records", type=int, required=True)
    produce.add_argument("--record-size", type=int, required=True, help="bytes per record value")
    produce.add_argument("--throughput", type=float, default=-1,
                         help="records/s to aim for; -1 (default) = as fast as possible")
    produce.add_argument("--producer-props", nargs="+", default=[], metavar="KEY=VALUE")
    produce.add_argument("--acks", choices=["all", "-1", "0", "1"], default=None)
    produce.add_argument("--compression-type", choices=["none", "gzip", "lz4"], default=None)
    produce.add_argument("--partition", type=int, default=None, help="send every record to this partition")
    produce.add_argument("--batch-rows", type=int, default=10_000,
                         help="rows per send_arrow call (Arrow API)")
    consume = modes.add_parser("consume", help="kafka-consumer-perf-test")
    _common(consume)
    consume.add_argument("--messages", type=int, required=True)
    consume.add_argument("--consumer-props", nargs="+", default=[], metavar="KEY=VALUE")
    consume.add_argument("--from-latest", action="store_true", help="start at the end, not the beginning")
    consume.add_argument("--timeout", type=int, default=10_000,
                         help="ms without a record before giving up (default 10000)")
    consume.add_argument("--fetch-size", type=int, default=None, help="max.partition.fetch.bytes")
    e2e = modes.add_parser("e2e", help="EndToEndLatency at a fixed rate")
    _common(e2e)
    e2e.add_argument("--num-records", type=int, required=True)
    e2e.add_argument("--record-size", type=int, default=100)
    e2e.add_argument("--throughput", type=float, default=10_000,
                     help="records/s (default 10000); <= 0: one record at a time, each acknowledged "
                          "and consumed before the next (Kafka's EndToEndLatency)")
    e2e.add_argument("--acks", choices=["all", "-1", "0", "1"], default="1")
    e2e.add_argument("--producer-props", nargs="+", default=[], metavar="KEY=VALUE")
    e2e.add_argument("--consumer-props", nargs="+", default=[], metavar="KEY=VALUE")
    e2e.add_argument("--timeout", type=int, default=30_000, help="ms to wait for the last records")


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT[,HOST:PORT]")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=None,
                        help="create the topic with this many partitions if it does not exist")
    parser.add_argument("--replication-factor", type=int, default=-1)
    parser.add_argument("--api", choices=["arrow", "record"], default="arrow",
                        help="Arrow batches (default) or one record per call")
    parser.add_argument("--runs", type=int, default=1, help="repeat and report min/median/max")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument("--progress", action="store_true", help="progress bar even when stderr is not a TTY")
    parser.add_argument("--plot", default=None, metavar="FILE.png",
                        help="latency histogram and throughput over time (matplotlib)")


def parse_properties(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"invalid property {item!r}: expected KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


def run_perf(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    validate_topic_name(args.topic)
    if args.runs <= 0:
        raise ValueError(f"--runs must be positive, got {args.runs}")
    try:
        _ensure_topic(args)
        runs, events = _run_all(args, err)
    except KafkaError as exc:
        raise ValueError(str(exc)) from None
    summary = summarize_runs(runs)
    if args.json:
        print(json.dumps({"mode": args.perf_mode, **summary,
                          "each_run": [r.as_dict() for r in runs]}), file=out)
    else:
        for run in runs:
            print(_human(args.perf_mode, run), file=out)
        if len(runs) > 1:
            print(_human_spread(summary), file=out)
    if args.plot:
        from broker.tools.perf_plot import plot_run

        title = f"pylog perf {args.perf_mode}: {args.topic}"
        label = "poll time (ms)" if args.perf_mode == "consume" else "latency (ms)"
        plot_run(args.plot, title, runs[-1].latency_values, events, label)
    return 0 if not any(r.extra.get("timed_out") for r in runs) else 1


def _ensure_topic(args) -> None:
    if args.partitions is None:
        return
    with AdminClient(args.bootstrap_server) as admin:
        if args.topic not in admin.list_topics():
            admin.create_topics(args.topic, partitions=args.partitions,
                                replication_factor=args.replication_factor)


def _run_all(args, err: TextIO) -> tuple[list[RunResult], dict]:
    runs, events = [], []
    for number in range(args.runs):
        events = []
        label = f"{args.perf_mode} run {number + 1}/{args.runs}" if args.runs > 1 else args.perf_mode
        total = args.messages if args.perf_mode == "consume" else args.num_records
        progress = Progress(total, label, err, enabled=True if args.progress else None)
        runs.append(_run_once(args, progress, events))
    return runs, events


def _run_once(args, progress: Progress, events: list):
    mode = args.perf_mode
    if mode == "produce":
        props = parse_properties(args.producer_props)
        if args.acks is not None:
            props["acks"] = args.acks
        if args.compression_type is not None:
            props["compression.type"] = args.compression_type
        options = ProduceOptions(args.topic, args.num_records, args.record_size, args.throughput,
                                 args.api, args.batch_rows, args.partition)
        _check_counts(args.num_records, args.record_size)
        result = run_produce(args.bootstrap_server, options, producer_options_from_properties(props),
                             progress, events)
    elif mode == "consume":
        if args.messages <= 0:
            raise ValueError(f"--messages must be positive, got {args.messages}")
        props = parse_properties(args.consumer_props)
        if args.fetch_size is not None:
            props["max.partition.fetch.bytes"] = str(args.fetch_size)
        options = ConsumeOptions(args.topic, args.messages, args.api, args.from_latest, args.timeout)
        result = run_consume(args.bootstrap_server, options, consumer_options_from_properties(props),
                             progress, events)
    else:
        props = parse_properties(args.producer_props)
        props["acks"] = args.acks
        _check_counts(args.num_records, args.record_size)
        options = E2EOptions(args.topic, args.num_records, args.record_size, args.throughput, args.timeout)
        result = run_e2e(args.bootstrap_server, options, producer_options_from_properties(props),
                         consumer_options_from_properties(parse_properties(args.consumer_props)),
                         progress, events)
    return result


def _check_counts(num_records: int, record_size: int) -> None:
    if num_records <= 0 or record_size <= 0:
        raise ValueError("--num-records and --record-size must be positive")


def _human(mode: str, run: RunResult) -> str:
    lat = run.latency
    if mode == "produce":
        return (f"{run.records} records sent, {run.records_per_sec:.1f} records/sec "
                f"({run.mb_per_sec:.2f} MB/sec), {lat['avg']:.2f} ms avg latency, {lat['max']:.2f} ms max "
                f"latency, {lat['p50']:.2f} ms 50th, {lat['p95']:.2f} ms 95th, {lat['p99']:.2f} ms 99th, "
                f"{lat['p99_9']:.2f} ms 99.9th.")
    if mode == "consume":
        return (f"data.consumed.in.MB={run.bytes / 1048576:.4f}, MB.sec={run.mb_per_sec:.4f}, "
                f"data.consumed.in.nMsg={run.records}, nMsg.sec={run.records_per_sec:.1f}, "
                f"elapsed.sec={run.elapsed_s:.3f}, poll.ms p50={lat['p50']:.2f} p99={lat['p99']:.2f} "
                f"p99.9={lat['p99_9']:.2f}")
    kept = f" (sender kept {run.extra['send_rate']:.1f} records/sec)" if "send_rate" in run.extra else ""
    return (f"{run.records} records received of {run.extra.get('sent')}, "
            f"{run.records_per_sec:.1f} records/sec{kept}. Avg latency: {lat['avg']:.4f} ms\n"
            f"Percentiles: 50th = {lat['p50']:.3f} ms, 99th = {lat['p99']:.3f} ms, "
            f"99.9th = {lat['p99_9']:.3f} ms, max = {lat['max']:.3f} ms")


def _human_spread(summary: dict) -> str:
    rate, mb = summary["records_per_sec_runs"], summary["mb_per_sec_runs"]
    p99 = summary["latency_ms_runs"]["p99"]
    return (f"over {summary['runs']} runs: records/sec min {rate['min']:.1f} median {rate['median']:.1f} "
            f"max {rate['max']:.1f}; MB/sec min {mb['min']:.2f} median {mb['median']:.2f} "
            f"max {mb['max']:.2f}; p99 ms min {p99['min']:.2f} median {p99['median']:.2f} max {p99['max']:.2f}")


if __name__ == "__main__":
    sys.exit(main())
