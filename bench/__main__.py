"""python -m bench run SCENARIO|all [--scale smoke|small|medium|large|xlarge|xxlarge|many] [--modes vanilla,recovery]
[--out FILE] [--master URL] [--sf F] [--queries 1,3] [--points fetch,fetch-both] [--reps N];
python -m bench plot; python -m bench table [--update README.md];
python -m bench chaos --runs N --seed S [--only INDEX ...] [--focus KIND] [--out FILE]"""

from __future__ import annotations

import argparse
import os
import sys

from . import harness, kill_points, scenarios


def _conf(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.startswith("spark."):
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE with a spark.* key")
    return key.strip(), value.strip()


def _queries(text: str) -> list[int]:
    try:
        numbers = [int(q) for q in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of query numbers") from None
    if not all(1 <= n <= 22 for n in numbers):
        raise argparse.ArgumentTypeError(f"TPC-H has queries 1 to 22, not {text}")
    return numbers


def _points(text: str) -> list[str]:
    try:
        return kill_points.check_points([p.strip() for p in text.split(",") if p.strip()])
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _reps(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of repetitions (1 or more)")
    return n


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run a scenario (or all) in vanilla and recovery mode")
    r.add_argument("scenario", choices=list(scenarios.SCENARIOS) + ["all"])
    r.add_argument("--scale", choices=list(scenarios.SCALES), default="small")
    r.add_argument("--master", default="local-cluster[2,1,1024]")
    r.add_argument("--out", help="result file (one scenario) or directory (all); default bench/results/")
    r.add_argument("--sf", type=float, default=1.0, help="tpch-executor-kill: TPC-H scale factor (default 1)")
    r.add_argument(
        "--conf",
        type=_conf,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting for every mode of the run (repeatable); recorded in the result",
    )
    r.add_argument("--queries", type=_queries, help="tpch-executor-kill: query numbers, e.g. 1,3,9 (default all 22)")
    r.add_argument(
        "--points",
        type=_points,
        help=f"executor-kill-points: kill points, e.g. fetch,fetch-both (of {', '.join(kill_points.KILLS)}; "
        f"default {','.join(kill_points.POINTS)})",
    )
    r.add_argument(
        "--modes",
        type=lambda text: [m.strip() for m in text.split(",") if m.strip()],
        help="only these of the scenario's modes (run in its order), e.g. vanilla,recovery to leave nofault out; "
        "vanilla and recovery always run",
    )
    r.add_argument(
        "--reps",
        type=_reps,
        help="applications per mode, in alternating mode order (default: the scenario's own at its scale, mostly 1); "
        "with more than one, each wall ratio gets a 95%% interval (ratios.<ratio>_95ci)",
    )
    sub.add_parser("plot", help="draw bench/results/*.json as PNG charts in bench/results/")
    rs = sub.add_parser(
        "restate",
        help="recompute committed results' ratios, paired intervals and targets (bench/stats.py) from their runs",
    )
    rs.add_argument("files", nargs="*", help="result files (default: every bench/results/*.json)")
    t = sub.add_parser("table", help="print bench/results/*.json as Markdown tables")
    t.add_argument("--update", metavar="FILE", help="rewrite FILE's generated blocks (<!-- bench:NAME -->) instead")
    c = sub.add_parser("chaos", help="the randomized fault campaign (bench/chaos.py)")
    c.add_argument("--runs", type=int, default=50)
    c.add_argument("--seed", type=int, default=1)
    c.add_argument("--only", type=int, nargs="+", metavar="INDEX", help="replay trials of the seed by their index")
    c.add_argument("--out", help="result file; default bench/results/chaos-seed<S>-<N>runs[-<focus>].json")
    c.add_argument("--focus", metavar="KIND", help="every trial's one fault is of this kind (e.g. partition-holder)")
    args = p.parse_args(argv)
    if args.cmd == "chaos":
        from . import chaos

        summary = chaos.campaign(args.runs, args.seed, args.only, args.out, args.focus)["summary"]
        return 0 if not summary["failed"] else 1  # a missed trial is reported, not failed
    if args.cmd == "table":
        from . import table

        if args.update:
            with open(args.update) as f:
                text = f.read()
            with open(args.update, "w") as f:
                f.write(table.update(text))
            print(f"updated the generated tables in {args.update}")
            return 0
        for name, make in table.TABLES.items():
            print(f"<!-- bench:{name} -->\n{make()}\n")
        return 0
    if args.cmd == "restate":
        from . import restate

        for line in restate.restate_all(args.files):
            print(line)
        return 0
    if args.cmd == "plot":
        from . import plot

        for path in plot.plot_all():
            print(path)
        return 0
    wanted = (  # an unknown mode fails before anything runs
        harness.select_modes_of_all(args.master, args.modes)
        if args.scenario == "all"
        else {args.scenario: harness.select_modes(args.scenario, args.master, args.modes)}
    )
    failed = []
    for name, modes in wanted.items():
        out = args.out
        if out and args.scenario == "all":
            os.makedirs(out, exist_ok=True)
            out = os.path.join(out, f"{name}.json")
        try:
            harness.run_scenario(
                name,
                args.scale,
                args.master,
                out,
                sf=args.sf,
                queries=args.queries,
                points=args.points,
                conf=dict(args.conf),
                only=list(modes),
                reps=args.reps,
            )
        except (harness.ChecksumMismatch, RuntimeError) as e:  # report it, go on with the other scenarios
            print(f"ERROR: {name}: {e}", file=sys.stderr)
            failed.append(name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
