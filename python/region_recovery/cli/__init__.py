"""The `region-recovery` command: the demo, saved reports, job event stores, the configuration keys, and how to
enable the plugin."""

from __future__ import annotations

import argparse
import logging
import sys

from .. import __version__
from ..jvm import packaging


def _cmd_demo(args) -> int:
    from .demo import run_demo

    run_demo(master=args.master, records=args.records, report_path=args.json)
    return 0


_REPORT_EXPECTED = "expected the JSON of rr.report() or of demo --json"
_JSON_TYPES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def _load_report(path: str) -> dict:
    """The report saved in ``path`` (alone, or under "report" as demo --json writes it); a
    RegionRecoveryError naming the file and what is wrong with it otherwise."""
    import json

    from ..errors import RegionRecoveryError
    from ..reporting.report import SCHEMA_VERSION, schema

    def wrong(what: str) -> RegionRecoveryError:
        return RegionRecoveryError(f"report {path}: {what}; {_REPORT_EXPECTED}")

    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise wrong(f"cannot read it ({e.strerror or e})") from None
    except UnicodeDecodeError:
        raise wrong("not UTF-8 text") from None
    if not text.strip():
        raise wrong("the file is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise wrong(f"not JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    report = data.get("report", data) if isinstance(data, dict) else data
    if not isinstance(report, dict):
        raise wrong(f"the JSON is {_JSON_TYPES.get(type(report), 'null')}, not a report object")
    missing = [key for key in schema()["required"] if key not in report]
    if missing:
        raise wrong(f"not a recovery report: no {', '.join(missing)}")
    if report["schema_version"] != SCHEMA_VERSION:
        raise wrong(f"schema_version {report['schema_version']!r}, this version reads {SCHEMA_VERSION}")
    return report


def _cmd_report(args) -> int:
    from ..errors import RegionRecoveryError
    from ..reporting.render import describe_report

    report = _load_report(args.path)
    if args.html:
        return _write_html(report, args.path, args.html)
    try:
        text = describe_report(report)
    except (KeyError, TypeError, AttributeError, ValueError) as e:  # a field of the wrong shape
        raise RegionRecoveryError(
            f"report {args.path}: a field does not have the report's shape ({type(e).__name__}: {e}); "
            + _REPORT_EXPECTED
        ) from None
    print(text)
    return 0


def _write_html(report: dict, path: str, out: str) -> int:
    from ..errors import RegionRecoveryError
    from ..reporting.history import RecoveryHistory
    from ..reporting.html import render_html

    try:
        page = render_html(RecoveryHistory.from_report(report), f"Recovery report: {report.get('app_id')}")
    except (KeyError, TypeError, AttributeError, ValueError) as e:  # pyarrow's errors are ValueErrors
        raise RegionRecoveryError(
            f"report {path}: a field does not have the report's shape ({type(e).__name__}: {e}); " + _REPORT_EXPECTED
        ) from None
    try:
        with open(out, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as e:
        raise RegionRecoveryError(f"cannot write {out}: {e.strerror or e}") from None
    print(f"wrote {out} ({len(page)} bytes, self-contained)")
    return 0


def _cmd_jar(args) -> int:
    print(packaging.jar_path())
    return 0


def _cmd_submit_args(args) -> int:
    """Prints spark-submit flags that enable the plugin (bundled jar, or --packages)."""
    existing: dict = {}
    settings = packaging.spark_settings(existing, use_packages=args.packages)
    flags = []
    for key, value in settings.items():
        if key == "spark.jars.packages":
            flags.append(f"--packages {value}")
        else:
            flags.append(f"--conf {key}={value}")
    print(" \\\n  ".join(flags))
    return 0


def _cmd_config(args) -> int:
    """Lists every key with its default and accepted values, or regenerates the docs' tables."""
    from .. import config

    if args.update_docs:
        with open(args.update_docs) as f:
            current = f.read()
        with open(args.update_docs, "w") as f:
            f.write(config.render_docs(current))
        return 0
    for key in sorted(config.registered_keys(), key=lambda k: k.name):
        print(f"{key.name} = {key.default_text}  [{key.type}, read by {key.read_by}]\n    accepted: {key.accepted}")
    return 0


def _cmd_job(args) -> int:
    """Prints what a job's event store holds (segments, recorded shuffles), as a resubmission would replay it."""
    import json

    from ..jobrecovery.store import read_job

    replay = read_job(args.dir, args.job_id)
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
    return 1 if replay.corrupt else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="region-recovery", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log region_recovery at INFO")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="run a multi-stage job, kill an executor mid-job, show the live model")
    demo.add_argument(
        "--master", default="local-cluster[2,1,1024]", help="Spark master (default: %(default)s, two executor JVMs)"
    )
    demo.add_argument("--records", type=int, default=20_000, help="input size (default: %(default)s)")
    demo.add_argument("--json", metavar="PATH", help="also write the model and status as JSON")
    demo.set_defaults(func=_cmd_demo)

    report = sub.add_parser("report", help="render a saved recovery report (JSON from rr.report() or demo --json)")
    report.add_argument("path")
    report.add_argument("--html", metavar="OUT", help="write one self-contained HTML file with charts instead")
    report.set_defaults(func=_cmd_report)

    jar = sub.add_parser("jar", help="print the path of the bundled plugin jar")
    jar.set_defaults(func=_cmd_jar)

    sa = sub.add_parser("submit-args", help="print spark-submit flags that enable the plugin")
    sa.add_argument("--packages", action="store_true", help=f"use --packages {packaging.MAVEN_COORDINATE}")
    sa.set_defaults(func=_cmd_submit_args)

    cfg = sub.add_parser("config", help="list every spark.regionRecovery.* key with its default and accepted values")
    cfg.add_argument("--update-docs", metavar="FILE", help="regenerate the key tables of docs/configuration.md")
    cfg.set_defaults(func=_cmd_config)

    job = sub.add_parser("job", help="show a job's event store (batch job recovery after a driver crash)")
    job.add_argument("job_id", help="spark.regionRecovery.job-recovery.job-id")
    job.add_argument("--dir", required=True, help="spark.regionRecovery.job-recovery.dir (a local path)")
    job.add_argument("--json", action="store_true", help="print the records as JSON")
    job.set_defaults(func=_cmd_job)

    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as e:
        from ..errors import RegionRecoveryError

        if isinstance(e, RegionRecoveryError):
            print(f"region-recovery: {e}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
