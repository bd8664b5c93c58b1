"""``region-recovery report PATH [--html OUT]``: renders a saved recovery report as text or as one HTML file."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = sub.add_parser("report", help="render a saved recovery report (JSON from rr.report() or demo --json)")
    report.add_argument("path")
    report.add_argument("--html", metavar="OUT", help="write one self-contained HTML file with charts instead")
    report.set_defaults(func=run)


_REPORT_EXPECTED = "expected the JSON of rr.report() or of demo --json"
_JSON_TYPES = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}


def _load_report(path: str) -> dict[str, Any]:
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


def run(args: argparse.Namespace) -> int:
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


def _write_html(report: dict[str, Any], path: str, out: str) -> int:
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
