"""The wire format's numbers have one declaration, ``object Event`` in core/Events.scala; Python's are generated."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    spec = importlib.util.spec_from_file_location("gen_wire_codes", ROOT / "scripts" / "gen_wire_codes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_wire_codes_are_up_to_date():
    gen = _generator()
    assert gen.OUTPUT.read_text() == gen.render(gen.SCALA.read_text()), (
        "python/region_recovery/jvm/_wire_codes.py is stale (core/Events.scala changed): "
        "run `.venv/bin/python scripts/gen_wire_codes.py`"
    )


def test_the_decoder_and_the_events_use_the_generated_codes():
    from region_recovery.jvm import _wire_codes, events, wire

    assert wire.WIRE_MAGIC == 0x52524231 and wire.WIRE_MAGIC is _wire_codes.WIRE_MAGIC
    assert events.Determinism is _wire_codes.Determinism and events.Outcome is _wire_codes.Outcome
    assert events.TaskEndReason is _wire_codes.TaskEndReason
    codes = [
        v for k, v in vars(_wire_codes).items() if k.startswith("WIRE_") and k not in ("WIRE_MAGIC", "WIRE_VERSION")
    ]
    assert sorted(codes) == list(range(1, len(codes) + 1))


def test_the_generator_refuses_what_it_cannot_read():
    gen = _generator()
    top, objects = gen.parse(
        "object Event {\n  /** doc */\n  val A = 1; val BeeCee: Int = 0x10\n  object R { val X = 3 }\n}\n"
    )
    assert top == [("A", "1", "doc"), ("BeeCee", "0x10", None)] and objects == [("R", None, [("X", "3", None)])]
    for bad in ("object Event {\n  val A = 1 + 1\n}\n", "object Event {\n  def a = 1\n}\n", "object Other {}\n"):
        with pytest.raises(ValueError):
            gen.parse(bad)
