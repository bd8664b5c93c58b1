"""``region-recovery submit-args [--packages] [--connect] [--format args|conf|json]``: the settings that enable the
plugin, as spark-submit flags, spark-defaults.conf lines, or a JSON map (a Spark operator's ``sparkConf``)."""

from __future__ import annotations

import argparse
import json

from ..jvm import packaging

FORMATS = ("args", "conf", "json")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sa = sub.add_parser(
        "submit-args",
        help="print the settings that enable the plugin: spark-submit flags (for $(...)), conf lines, or JSON",
    )
    sa.add_argument("--packages", action="store_true", help=f"use --packages {packaging.MAVEN_COORDINATE}")
    sa.add_argument(
        "--connect",
        action="store_true",
        help="for a Spark Connect server (sbin/start-connect-server.sh): also the plugin's Connect extension",
    )
    sa.add_argument(
        "--format",
        choices=FORMATS,
        default="args",
        help="args: spark-submit flags, one per line, for `spark-submit $(region-recovery submit-args) app.py` "
        "(the default); conf: spark-defaults.conf lines; json: a JSON object of settings (a Spark operator's "
        "sparkConf map)",
    )
    sa.set_defaults(func=run)


def settings(use_packages: bool, connect: bool = False) -> dict[str, str]:
    """What ``configure()`` sets on a builder that has nothing yet (for a Spark Connect server: and the extension
    through which clients attach); with ``use_packages``, ``spark.jars.packages`` instead of the bundled jar."""
    return (
        packaging.connect_settings({}, use_packages=use_packages)
        if connect
        else packaging.spark_settings({}, use_packages=use_packages)
    )


def flags(use_packages: bool, connect: bool = False) -> list[str]:
    """The settings as spark-submit flags, one per line."""
    s = settings(use_packages, connect)
    out = [f"--packages {s.pop('spark.jars.packages')}"] if use_packages else []
    return out + [f"--conf {key}={value}" for key, value in s.items()]


def render(fmt: str, use_packages: bool, connect: bool = False) -> str:
    """The settings in ``fmt``: no shell continuations, so ``$(...)`` splits them into words as they are."""
    if fmt == "args":
        return "\n".join(flags(use_packages, connect))
    s = settings(use_packages, connect)
    if fmt == "conf":
        return "\n".join(f"{key} {value}" for key, value in s.items())
    if fmt == "json":
        return json.dumps(s, indent=2)
    raise ValueError(f"unknown format {fmt!r}: one of {', '.join(FORMATS)}")


def run(args: argparse.Namespace) -> int:
    """Prints the settings that enable the plugin (bundled jar, or --packages) in the chosen format."""
    print(render(args.format, args.packages, args.connect))
    return 0
