"""``region-recovery config [--update-docs FILE]``: lists every key, or regenerates docs/configuration.md's tables."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cfg = sub.add_parser("config", help="list every spark.regionRecovery.* key with its default and accepted values")
    cfg.add_argument("--update-docs", metavar="FILE", help="regenerate the key tables of docs/configuration.md")
    cfg.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
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
