"""An example pccx-flow scheduling policy, written outside the package as a plugin.

The plugin contract is small: a class with a ``name``, a one-line ``description`` and a
method ``schedule(problem, timeline)`` that places every node with ``timeline.place`` and
returns None. The timeline computes the times (dependencies, lanes, weight ports); pccx-flow
validates the result and measures it like any built-in policy. The class is found through
the entry point in ``pyproject.toml``, or by ``--policy pccx_example_scheduler:LongestFirst``.

This policy is the classic LPT rule (longest processing time first) on a DAG: of the ready
nodes, the one with the largest cost goes next, onto the lane that finishes it earliest. It
is a reasonable greedy rule for filling parallel lanes, but it looks at no successors, so on
a decode step it is a foil for ``critical-path`` rather than a rival.
"""

from __future__ import annotations

import heapq


class LongestFirst:
    name = "longest-first"
    description = "example plugin: longest ready node first (LPT)"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed  # deterministic policy; accepted so --seed never breaks it

    def schedule(self, problem, timeline) -> None:
        def key(node):
            # Largest cost on its cheapest lane first; program order breaks ties.
            return (-min(problem.costs[node].values()), problem.index[node], node)

        ready = [key(n) for n in timeline.initial_ready()]
        heapq.heapify(ready)
        while ready:
            node = heapq.heappop(ready)[2]
            lane, _ = timeline.best_lane(node, by="finish")
            timeline.place(node, lane)
            for succ in timeline.released(node):
                heapq.heappush(ready, key(succ))
