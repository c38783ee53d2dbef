"""Join algorithms: batch (AM-Join paper family and baselines) and online (dataflow engine)."""
