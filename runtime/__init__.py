"""What every layer shares, below all of them: paths, Spark sessions and presets, code shipping
to executors, event-log task metrics, calibration loading and the batch cost model.

``runtime`` imports nothing from ``datagen``, ``joins``, ``experiments`` or ``figures``
(``tests/test_layering.py`` checks it)."""
