"""What each algorithm parameter (``param.<name>=``) means: one line per name, shared by every
algorithm that reads it (``python -m joins describe``). Defaults are read from the code that
uses them (:func:`joins.cli_checks.algorithm_param_defaults`), so they are never restated here;
tests/test_cli.py checks that every parameter an algorithm reads has a line."""

from __future__ import annotations

# the papers an algorithm comes from (the registry's short names)
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
    # online operators
    "eps": "DYNAMIC's trigger: a decision when a relation grew by this fraction (1: doubling)",
    "warmup": "tuples before DYNAMIC's first decision (none: 1% of the stream); for 2PS, "
              "event time before its first check",
    "decide_on": "sizes DYNAMIC decides on: updated (|R|+|dR|) or previous (|R|)",
    "initial": "DYNAMIC's first (n,m) mapping; none means (sqrt J, sqrt J)",
    "jump": "how DYNAMIC reaches a mapping several doublings away: direct (one migration) or "
            "steps (one per doubling)",
    "groups": "partition groups over the joiners (relocation moves whole groups); none "
              "means one per joiner (mjoin), D-CAPE's 300 (dcape)",
    # D-CAPE (times in the event-time column's unit)
    "by": "how keys form partition groups: mod (key mod groups, D-CAPE's generator) or hash",
    "assign": "initial groups per machine: contiguous, round_robin, or skewed (skew_share on "
              "machine 0)",
    "skew_share": "share of the partition groups on machine 0 with assign=skewed",
    "adapt": "D-CAPE's adaptation: none (out of memory stops the run), disk, relocate, "
             "lazy_disk or active_disk",
    "push": "which groups a disk push takes: random, low_output (idle, then largest P_s/P_o) "
            "or high_output (smallest P_s/P_o)",
    "push_percent": "share of a machine's in-memory state one push sends to disk (%)",
    "theta_m": "a machine pushes when its memory passes theta_m x the budget",
    "theta_t": "groups idle longer than this are pushed first; none: no idle rule",
    "theta_d": "relocation starts when the least used machine holds less than theta_d of the "
               "most used",
    "min_span": "least event time between two adaptations of the manager",
    "theta_f": "active-disk: the slowest machine pushes when Max_Rate/Min_Rate exceeds this",
    "active_from": "active-disk pushes only once a machine holds this share of its budget (0: "
                   "whenever rates differ, the paper's text)",
    "msg_seconds": "modeled latency of one control message of the relocation protocol (s)",
    "bandwidth": "modeled network bandwidth of a relocation (bytes/s)",
    "state_bytes": "modeled bytes of one state tuple (D-CAPE relocation transfer time)",
    "contrand": "ContRand subgroups per side (JBx-CRy: y); none or 1 is random routing",
    "key_range": "the key domain ContRand's range subgroups split (band joins; default: the inputs' keys)",
    "tuple_bytes": "bytes of one stored tuple per input (BiStream's chi_R, chi_S; the run's own)",
    "elastic": "2ps: BiStream's two-phase scaling of a join-biclique (needs capacity=; a "
               "full history migrates state, a window drains)",
    "full_history": "2PS: set by the engine when the join has no window (state then migrates)",
    "capacity": "2PS: a unit's memory capacity C in bytes (MLV = stored tuples x tuple_bytes)",
    "t_high": "2PS: load tau above which a side scales out (the paper's T_h = 0.8)",
    "t_low": "2PS: load tau below which a side scales in (T_l = 0.3)",
    "psi": "2PS: the target load Psi of Eq. 7 (0.6)",
    "check_every": "2PS: event time between two load checks (the paper's 1 minute)",
    "confirmations": "2PS: identical decisions in a row before scaling (3)",
    "scaling_scope": "2PS: the units k of Eq. 7: subgroup (each side or ContRand subgroup "
                     "checked and scaled on its own, the default) or cluster (one tau and one "
                     "Delta over all units)",
    "r_units": "join-biclique units that store R (the rest store S); none means half",
    # single-site operators under a memory budget (DINER paper); times in the arrival times' unit
    "tups_per_block": "tuples per disk block (the paper: 10 KB blocks of 200-byte tuples, 50)",
    "max_outer_mem": "DINER's MaxOuterMem: outer blocks loaded per ReactiveNL batch",
    "max_new_arr": "DINER's MaxNewArr: buffered arrivals that end the reactive phase",
    "wait_thresh": "WaitThresh: time with no arrival before the reactive phase starts",
    "c_read": "modeled time of reading one disk block",
    "c_write": "modeled time of writing one disk block",
    "c_join": "modeled time of joining one block read in the reactive phase or clean-up",
    "c_arrive": "modeled time of processing one arrival (0: arrivals never wait for the CPU)",
    "n_part": "hash buckets per relation (HMJ, XJoin, RPJ, MJoin's coordinated flushing; the "
              "paper does not give it)",
    "fan_in": "segments merged per unit of the merging phase (the paper's F; PMJ: runs, F/2 "
              "run pairs)",
    "n_flush": "tuples RPJ flushes at a time, from the buckets least likely to be probed "
               "(default one block)",
    "flushing": "mjoin under a memory budget: 'coordinated' evicts the largest hash bucket from "
                "every input, one site (the DINER paper's MJoin baseline, Fig 22)",
}
