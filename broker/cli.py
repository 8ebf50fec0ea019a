"""The ``pylog`` command line.

Each subcommand is a thin adapter over a module in ``broker.tools``. User mistakes (a missing file,
a bad option) print one line on stderr and exit non-zero, never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pylog", description="pylog: a Kafka-protocol log in Python")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    dump = sub.add_parser("dump-log", help="list the batches of a segment (.log) file")
    dump.add_argument("segment", help="path to a <base offset>.log segment file")
    dump.add_argument("--print-records", action="store_true", help="also print every record")

    from broker.tools.cluster import add_cluster_parser
    from broker.tools.produce_consume import add_consume_parser, add_produce_parser
    from broker.tools.topics import add_topics_parser

    add_topics_parser(sub)
    add_produce_parser(sub)
    add_consume_parser(sub)
    add_cluster_parser(sub)

    from broker.tools.groups import add_groups_parser
    from broker.tools.perf import add_perf_parser

    add_perf_parser(sub)
    add_groups_parser(sub)

    from broker.tools.lag import add_lag_parser

    add_lag_parser(sub)

    from broker.tools.transactions import add_transactions_parser

    add_transactions_parser(sub)

    from broker.tools.kafka_peer import add_peer_parser

    add_peer_parser(sub)

    from broker.tools.configs import add_configs_parser
    from broker.tools.delete_records import add_delete_records_parser

    add_configs_parser(sub)
    add_delete_records_parser(sub)

    from broker.tools.leader_election import add_leader_election_parser

    add_leader_election_parser(sub)

    from broker.tools.log_dirs import add_log_dirs_parser

    add_log_dirs_parser(sub)

    from broker.tools.reassign import add_reassign_parser

    add_reassign_parser(sub)

    from broker.tools.acls import add_acls_parser

    add_acls_parser(sub)

    broker = sub.add_parser("broker", help="run one broker in the foreground")
    broker_actions = broker.add_subparsers(dest="broker_command", required=True, metavar="ACTION")
    start = broker_actions.add_parser("start", help="run a broker until SIGTERM or Ctrl-C")
    start.add_argument("--config", required=True, help="server.properties-style file (see conf/)")
    start.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help="override one property; repeat for several")

    demo = sub.add_parser("demo", help="append to a partition log, tear its tail, recover it (make demo runs the Spark demo)")
    demo.add_argument("--dir", default=None, help="working directory (default: a temporary one)")
    demo.add_argument("--records", type=int, default=3_000_000, help="records to append")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    if args.command == "broker":
        return _run_broker(args)  # before basicConfig: the broker sets up its own logging
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "dump-log":
            from broker.tools.dump_log import dump_segment

            return dump_segment(args.segment, sys.stdout, args.print_records)
        if args.command == "topics":
            from broker.tools.topics import run_topics

            return run_topics(args, sys.stdout, sys.stderr)
        if args.command == "produce":
            from broker.tools.produce_consume import run_produce

            return run_produce(args, sys.stdin.buffer, sys.stderr)
        if args.command == "consume":
            from broker.tools.produce_consume import run_consume

            return run_consume(args, sys.stdout.buffer, sys.stderr)
        if args.command == "groups":
            from broker.tools.groups import run_groups

            return run_groups(args, sys.stdout, sys.stderr)
        if args.command == "lag":
            from broker.tools.lag import run_lag

            return run_lag(args, sys.stdout, sys.stderr)
        if args.command == "transactions":
            from broker.tools.transactions import run_transactions

            return run_transactions(args, sys.stdout, sys.stderr)
        if args.command == "perf":
            from broker.tools.perf import run_perf

            return run_perf(args, sys.stdout, sys.stderr)
        if args.command == "cluster":
            from broker.tools.cluster import run_cluster

            return run_cluster(args, sys.stdout, sys.stderr)
        if args.command == "reassign":
            from broker.tools.reassign import run_reassign

            return run_reassign(args, sys.stdout, sys.stderr)
        if args.command == "log-dirs":
            from broker.tools.log_dirs import run_log_dirs

            return run_log_dirs(args, sys.stdout, sys.stderr)
        if args.command == "leader-election":
            from broker.tools.leader_election import run_leader_election

            return run_leader_election(args, sys.stdout, sys.stderr)
        if args.command == "delete-records":
            from broker.tools.delete_records import run_delete_records

            return run_delete_records(args, sys.stdout, sys.stderr)
        if args.command == "configs":
            from broker.tools.configs import run_configs

            return run_configs(args, sys.stdout, sys.stderr)
        if args.command == "acls":
            from broker.tools.acls import run_acls

            return run_acls(args, sys.stdout, sys.stderr)
        if args.command == "peer":
            from broker.tools.kafka_peer import run_peer

            return run_peer(args, sys.stdout, sys.stderr)
        if args.command == "demo":
            from broker.tools.log_demo import run_demo

            return run_demo(args.dir, args.records, sys.stdout)
    except FileNotFoundError as exc:
        print(f"pylog {args.command}: no such file: {exc.filename}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:
        print(f"pylog {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    raise AssertionError(f"unhandled command {args.command}")


def _run_broker(args: argparse.Namespace) -> int:
    """``pylog broker start``: ``python -m broker.server`` in this process (its exit codes:
    2 for a bad config, 1 for a failed start, 0 after a clean stop)."""
    from broker.server.__main__ import main as server_main

    server_argv = ["--config", args.config]
    for item in args.set:
        server_argv += ["--set", item]
    try:
        return server_main(server_argv)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
