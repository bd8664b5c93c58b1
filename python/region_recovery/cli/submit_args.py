"""``region-recovery submit-args [--packages]``: prints spark-submit flags that enable the plugin."""

from __future__ import annotations

import argparse

from ..jvm import packaging


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sa = sub.add_parser("submit-args", help="print spark-submit flags that enable the plugin")
    sa.add_argument("--packages", action="store_true", help=f"use --packages {packaging.MAVEN_COORDINATE}")
    sa.add_argument(
        "--connect",
        action="store_true",
        help="for a Spark Connect server (sbin/start-connect-server.sh): also the plugin's Connect extension",
    )
    sa.set_defaults(func=run)


def flags(use_packages: bool, connect: bool = False) -> list[str]:
    """The flags, one per line: what ``configure()`` sets on a builder that has nothing yet (for a Spark Connect
    server: and the extension through which clients attach)."""
    settings = (
        packaging.connect_settings({}, use_packages=use_packages)
        if connect
        else packaging.spark_settings({}, use_packages=use_packages)
    )
    out = [f"--packages {settings.pop('spark.jars.packages')}"] if use_packages else []
    return out + [f"--conf {key}={value}" for key, value in settings.items()]


def run(args: argparse.Namespace) -> int:
    """Prints spark-submit flags that enable the plugin (bundled jar, or --packages)."""
    print(" \\\n  ".join(flags(args.packages, args.connect)))
    return 0
