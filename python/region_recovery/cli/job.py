"""``region-recovery job JOB_ID --dir DIR [--json]``: shows a job's event store (job recovery after a driver crash).

The plugin reads the store (``jobrecovery.read_job`` runs its JobReplayMain in a JVM of its own): java and
pyspark's jars are needed, no Spark application."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..jobrecovery.replay import JobEvent


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    job = sub.add_parser("job", help="show a job's event store (batch job recovery after a driver crash)")
    job.add_argument("job_id", help="spark.regionRecovery.job-recovery.job-id")
    job.add_argument("--dir", required=True, help="spark.regionRecovery.job-recovery.dir (a path or a URI)")
    job.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Hadoop setting for the dir's file system (spark.hadoop.* as the driver has it, or the bare key); "
        "$HADOOP_CONF_DIR's core-site.xml is read too",
    )
    job.add_argument(
        "--jars", default="", metavar="JARS", help="comma-separated jars of the dir's file system (hadoop-aws, ...)"
    )
    job.add_argument("--json", action="store_true", help="print the records as JSON")
    job.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Prints what a job's event store holds (segments, recorded shuffles), as a resubmission would replay it."""
    import json

    from ..jobrecovery import read_job

    conf = {}
    for setting in args.conf:
        key, sep, value = setting.partition("=")
        if not sep or not key:
            raise SystemExit(f"region-recovery job: --conf {setting!r} is not KEY=VALUE")
        conf[key] = value
    replay = read_job(args.dir, args.job_id, conf, [j for j in args.jars.split(",") if j])
    if args.json:
        print(
            json.dumps(
                {
                    "segments": replay.segments,
                    "ignored": replay.ignored,
                    "corrupt": replay.corrupt,
                    "events": [{"kind": e.kind, **e.payload} for e in replay.events],
                },
                indent=2,
            )
        )
        return 0
    if not replay.segments:
        print(f"job {args.job_id!r}: no event store under {args.dir} (nothing to recover; a succeeded job leaves none)")
        return 0
    print(f"job {args.job_id!r}: {len(replay.segments)} segment(s) under {args.dir}")
    if replay.corrupt:
        print(f"  CORRUPT, a resubmission runs as new: {replay.corrupt}")
    for note in replay.ignored:
        print(f"  ignored: {note}")
    for e in replay.events:
        try:
            _print_event(e)
        except (KeyError, TypeError):  # a record of another plugin version: shown as it is
            print(f"  {e.kind}: {json.dumps(e.payload, ensure_ascii=False)}")
    return 1 if replay.corrupt else 0


def _print_event(e: JobEvent) -> None:
    p = e.payload
    if e.kind == "shuffle":
        outputs = p.get("outputs", [])
        hosts = sorted({o["host"] for o in outputs})
        print(
            f"  shuffle {p['shuffle_id']} of {p['app_id']}: {p['description']}; {len(outputs)} of "
            f"{p['num_maps']} map outputs retained on {', '.join(hosts) or 'no host'}, "
            f"{sum(o['bytes'] for o in outputs)} bytes, {p['row_count']} rows"
        )
    elif e.kind == "application":
        print(f"  application {p.get('app_id')} (retained directory {p.get('app_key')})")
    elif e.kind == "segment":
        versions = f"Spark {p.get('spark_version')}, plugin {p.get('plugin_version')}"
        print(f"  segment of driver {p.get('driver')} ({versions})")
