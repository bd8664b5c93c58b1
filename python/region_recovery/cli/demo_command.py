"""``region-recovery demo``: runs the demo (cli.demo) on a Spark master of choice."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    demo = sub.add_parser("demo", help="run a multi-stage job, kill an executor mid-job, show the live model")
    demo.add_argument(
        "--master", default="local-cluster[2,1,1024]", help="Spark master (default: %(default)s, two executor JVMs)"
    )
    demo.add_argument("--records", type=int, default=20_000, help="input size (default: %(default)s)")
    demo.add_argument("--json", metavar="PATH", help="also write the model and status as JSON")
    demo.add_argument("--history", metavar="DIR", help="also save the recovery history (rr.history()) as Parquet")
    demo.add_argument(
        "--connect",
        action="store_true",
        help="run it as a Spark Connect client of a local Connect server on the master (docs/connect.md)",
    )
    demo.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.connect:
        from .demo_connect import run_connect_demo as run_demo
    else:
        from .demo import run_demo

    run_demo(master=args.master, records=args.records, report_path=args.json, history_dir=args.history)
    return 0
