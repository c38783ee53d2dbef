"""The AM-Join paper's toy example of Figs. 2 and 3, reconstructed (the figures are images).

Keys 1 and 2 are hot in both relations, 3 and 4 cold, 5 and 6 on one side only; with the hot
threshold τ = 2.2 (isHotKey compares sqrt(ℓ1·ℓ2) with τ) exactly the figure's lists are hot.
Fig. 3 runs it on 6 partitions: treeJoinBasic's first iteration puts key 1's 20 pairs on one
partition and leaves others idle (the paper's 20/0); treeJoin spreads it (the paper's 10/4).
"""

from __future__ import annotations

import pandas as pd

FIG3_R = pd.DataFrame({"key": [1] * 4 + [2] * 3 + [3] * 2 + [4] + [5] * 2,
                       "a": [f"r{i}" for i in range(12)]})
FIG3_S = pd.DataFrame({"key": [1] * 5 + [2] * 3 + [3] * 2 + [4] * 2 + [6] * 2,
                       "c": [f"s{i}" for i in range(14)]})
FIG3_PARAMS = {"hot_threshold": 2.2}
FIG3_PARTITIONS = 6
