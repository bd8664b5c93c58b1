"""Fixtures shared by the unit tests (the model builders live in test_model.py)."""

from test_model import job_model  # noqa: F401  (a fixture, offered to every unit test module)
