"""Helpers for tests and the demo, outside the runtime path: real faults on our own processes."""
