"""The emulator as a generation backend: each decode step becomes a program, and its words run.

`pccx-flow run --backend emulator` generates tokens the way the board would: per position the
decode graph is built for the hardware profile, scheduled by the L2-aware timeline, lowered to
a pccx v002 program (`pccx_flow.board.program.lower`), and the program's words - never the
graph - are executed by the functional emulator (`pccx_flow.board.emulator.emulate`) on the
DDR image, the KV cache and the host steps. The step's new KV rows go into the decode state
as the executor's do, so the generation loop (`pccx_flow.execute.generate`) and `run --check`
treat both backends alike.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pccx_flow.execute.runtime import StepContext
from pccx_flow.execute.state import DecodeState, commit_step


def emulator_graphs(
    config, semantics: str, policy: Any, profile: Any, target: str | None = None
) -> Callable[[int], tuple[Any, Any]]:
    """position -> (decode graph, L2-aware schedule) on `profile` (a loaded `Profile`).

    `target` (None: the profile's) sets the graph's row alignment (`row_align_for`)."""
    from pccx_flow.board.isa.target import row_align_for, target_of
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import run_policy

    align = row_align_for(target_of(profile, target))

    def build(position: int):
        graph = build_decode_graph(
            config, semantics=semantics, position=position, profile=profile, row_align=align
        )
        problem = problem_from_graph(graph, profile, memory=True)
        return graph, run_policy(problem, profile, policy)

    return build


@dataclass
class EmulatorSteps:
    """A step function for `generate`: lower the step's schedule, emulate the words.

    Keeps each step's program summary (instructions, batches, fences, L2 peak) so the run
    can say what the board would have executed.
    """

    weights: Any
    profile: Any
    numerics: str = "spec"
    target: str | None = None  # None: the profile's ([program] target)
    summaries: list[dict] = field(default_factory=list)

    def __call__(self, graph, schedule, state: DecodeState, precision: str) -> np.ndarray:
        from pccx_flow.board.emulator.emulate import emulate
        from pccx_flow.board.program.lower import lower
        from pccx_flow.precision import computing_in

        program = lower(graph, schedule, self.profile, state.config, target=self.target)
        self.summaries.append(program.summary)
        ctx = StepContext(state.config, state.semantics, state.position, state.token_id, precision)
        with computing_in(precision):
            logits, rows = emulate(
                program, self.weights, state.k_cache, state.v_cache, state.token_id,
                numerics=self.numerics, ctx=ctx,
            )  # fmt: skip
        commit_step(state, rows)
        return logits
