"""What each parameter (``param.<name>=``) means and the papers algorithms come from
(``python -m joins describe``). An online operator declares its parameters' meanings and
defaults itself (:class:`joins.online.operator_spec.Param`); a batch algorithm's parameters are
the ``ctx.params`` keys its code reads, with defaults read from that code
(:func:`joins.cli_checks.algorithm_param_defaults`) and one meaning per name here, shared by
every batch algorithm that reads it. tests/test_cli_checks.py checks that every parameter has a
meaning."""

from __future__ import annotations

# the papers an algorithm comes from (the registry's short names; None: an algorithm of none)
PAPERS: dict[str, str] = {
    "amjoin": "Metwally, Scaling and Load-Balancing Equi-Joins (AM-Join), extended version",
    "squall": "Elseidy et al., Scalable and Adaptive Online Joins, PVLDB 7(6), 2014",
    "bistream": "Lin et al., Scalable Distributed Stream Join Processing, SIGMOD 2015",
    "diner": "Bornea et al., Adaptive Join Operators for Result Rate Optimization on Streaming "
             "Inputs, IEEE TKDE",
    "dcape": "Liu, Rundensteiner, Adapting State-Intensive Non-Blocking Queries over "
             "Distributed Environments, WPI-CS-TR-05-04, 2005",
}

PARAM_DOCS: dict[str, str] = {
    # hot keys (AM-Join paper; also Full-SkewJoin's threshold)
    "hot_threshold": "τ: a key with at least this many records in a relation is hot",
    "max_hot_keys": "|κ|max: at most this many hot keys per relation (the most frequent)",
    "hot_key_method": "how hot keys are found: exact (a Spark count) or space_saving "
                      "(the paper's heavy-hitter summary, estimated frequencies)",
    "hh_capacity": "counters of the Space-Saving summary (hot_key_method=space_saving); "
                   "none means 10 x max_hot_keys",
    # Tree-Join
    "coalesce_maps": "run the unraveling's and chunking's map sides as E tasks (one wave) "
                     "instead of one per input partition",
    "canonical_order": "sort each output pair's record lists so outputs are deterministic",
    "sublist_ids": "how a hot key's records are split into sub-lists: by input position "
                   "(deterministic for cached inputs) or by record content",
    "self_join_diagonal": "in a self-join, pair a record with itself (n² pairs per key); "
                          "false gives the other reading, n(n-1)/2",
    # AM-Join
    "lambda": "λ, the network-vs-disk cost ratio; by default derived from τ = (1+λ)^(3/2)",
    "broadcast_rule": "IB-Join's broadcast of the hot-cold sub-relations: cost (Eqn. 5 "
                      "decides), always or never",
    "persist_split": "split=tag: persist the tagged sub-relations instead of recomputing each",
    "split": "how the HH/HC/CH/CC sub-relations are made: filter (key-set filters of the "
             "cached input, sizes from the hot-key pass) or tag (a tagging pass, persisted, "
             "and a count job)",
    "fuse_shuffles": "run HC, CH and CC as one Shuffle-Join when neither HC nor CH is "
                     "broadcast (one shuffle instead of three)",
    "subjoin_partitions": "partitions of the HH, HC and CH sub-joins: sized by their work "
                          "(default) or all (the input's)",
    # Spark's own joins
    "skewed_partition_factor": "Spark AQE: a partition this many times the median is skewed",
    "skewed_partition_threshold_bytes": "Spark AQE: and larger than this (e.g. 1MB) to be split",
    "advisory_partition_bytes": "Spark AQE: target size of a split or coalesced partition",
    "auto_broadcast_bytes": "Spark: broadcast a side smaller than this (-1: never)",
    # FGSD-Join
    "sample_factor": "records sampled per relation: this many times the partition count",
    "fine_factor": "key ranges cut per partition before they are packed onto partitions",
    "output_weight": "weight of the estimated output pairs in a key's load",
    # Small-Large outer joins (DER, DDR)
    "small_side": "which input is the small relation: right or left",
    "id_bytes": "bytes of a record id in the cost formulas (Table 1)",
    "small_record_bytes": "bytes of a small-relation record in the cost formulas; none means "
                          "record_bytes",
}


def meaning(algo, name: str) -> str | None:
    """What parameter ``name`` of ``algo`` (a :class:`joins.registry.Algorithm`) means."""
    if algo.kind == "online":
        param = algo.load().params.get(name)
        return param.meaning if param is not None else None
    return PARAM_DOCS.get(name)
