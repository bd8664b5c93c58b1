"""``region-recovery submit-args [--packages]``: prints spark-submit flags that enable the plugin."""

from __future__ import annotations

from ..jvm import packaging


def add_parser(sub) -> None:
    sa = sub.add_parser("submit-args", help="print spark-submit flags that enable the plugin")
    sa.add_argument("--packages", action="store_true", help=f"use --packages {packaging.MAVEN_COORDINATE}")
    sa.set_defaults(func=run)


def run(args) -> int:
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
