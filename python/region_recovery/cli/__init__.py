"""The `region-recovery` command: the demo, saved reports, job event stores, the configuration keys, and how to
enable the plugin."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from .._version import __version__
from . import config, demo_command, jar, job, report, submit_args


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="region-recovery", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log region_recovery at INFO")
    sub = parser.add_subparsers(dest="command", required=True)

    for command in (demo_command, report, jar, submit_args, config, job):
        command.add_parser(sub)

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
