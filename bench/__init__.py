"""Benchmarks: recovery cost side by side with vanilla Spark (`python -m bench run SCENARIO`)."""
