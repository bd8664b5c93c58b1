"""``region-recovery jar``: prints the path of the bundled plugin jar."""

from __future__ import annotations

import argparse

from ..jvm import packaging


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    jar = sub.add_parser("jar", help="print the path of the bundled plugin jar")
    jar.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    print(packaging.jar_path())
    return 0
