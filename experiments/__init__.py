"""Glue between configs, generators, joins and results: runner, Spark sessions, metrics, targets."""
