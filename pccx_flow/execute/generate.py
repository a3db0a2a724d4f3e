"""Generation with the executed decode graph: the reference loop, step for step, over `execute`.

The loop follows `pccx_flow.reference.generate.generate` exactly (the contract is written in
that module's docstring): a fresh state, the prompt fed one token per step at positions
``0..n-1``, then each sampled token fed at the next position; `sample_next_token` with the
repetition penalty over prompt + generated tokens; one ``default_rng(seed)`` and one draw per
generated token when ``temperature > 0``; ``n + steps - 1`` decode steps, checked against the
KV cache length before anything runs.

What changes per position is the graph: KV-read and attention nodes see ``position + 1``
rows. The graph (and its schedule, when a policy is given) is rebuilt per position, which
is the honest thing to execute; what does not depend on the position (the checkpoint, the
profile, the opened weights) is created once.
"""

from __future__ import annotations

import operator
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pccx_flow.collector import collector_paused
from pccx_flow.errors import InputError
from pccx_flow.execute.executor import CONNECT_TIMEOUT_S, connect, execute
from pccx_flow.execute.runtime import WeightsRef
from pccx_flow.execute.state import check_token_id, new_decode_state
from pccx_flow.model.config import check_semantics
from pccx_flow.precision import DEFAULT_PRECISION, check_precision
from pccx_flow.sampling import DEFAULT_PENALTY, DEFAULT_TOP_P, sample_next_token


@dataclass
class ExecutedGeneration:
    """Generated tokens, the logits of every decode step, and each step's CPU wall times:
    executing its graph, and building that graph (and its schedule) before."""

    tokens: list[int] = field(default_factory=list)
    logits: list[np.ndarray] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)  # CPU execution, not an NPU estimate
    build_seconds: list[float] = field(default_factory=list)  # graph (+ schedule) per position


def check_steps(steps: Any) -> int:
    """`steps` as an int >= 1, else `InputError`."""
    try:
        n = operator.index(steps)
    except TypeError:
        raise InputError(f"steps must be an integer, got {steps!r}") from None
    if n < 1:
        raise InputError(f"steps must be >= 1 (tokens to generate), got {n}")
    return n


def check_prompt(config, prompt_ids: Sequence[int], steps: int) -> list[int]:
    """Validate the prompt ids and that ``n + steps - 1`` positions fit in the KV cache."""
    prompt = list(prompt_ids)
    if not prompt:
        raise InputError("the prompt is empty; give at least one token id")
    for t in prompt:
        check_token_id(config, t)
    n_positions = len(prompt) + steps - 1
    if n_positions > config.max_seq:
        raise InputError(
            f"{len(prompt)} prompt tokens + {steps} steps need {n_positions} positions but the "
            f"{config.name} KV cache holds {config.max_seq}; shorten the prompt or generate fewer"
            " steps"
        )
    return [int(t) for t in prompt]


def default_graph_builder(config, semantics: str, *, policy=None, profile=None, tile_rows=512):
    """A function position -> (graph, schedule or None) using the graph builder and policy."""
    from pccx_flow.graph.build import build_decode_graph

    prof = None
    if policy is not None:
        from pccx_flow.hardware.profile import load_profile

        prof = load_profile(profile or "v002-spec") if isinstance(profile, str | None) else profile
        if isinstance(policy, str):  # load it once (a plugin: in a child process)
            from pccx_flow.schedule.registry import prepare_policy

            policy = prepare_policy(policy)

    def build(position: int):
        graph = build_decode_graph(
            config, semantics=semantics, position=position, profile=prof, tile_rows=tile_rows
        )
        schedule = None
        if policy is not None:
            from pccx_flow.schedule.registry import run_policy

            schedule = run_policy(graph, prof, policy)
        return graph, schedule

    return build


def _progress_bar(total: int, enabled: bool):
    if not enabled or not sys.stderr.isatty():
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="decode", unit="step", file=sys.stderr)


def generate(
    weights: Any,
    prompt_ids: Sequence[int],
    steps: int,
    *,
    semantics: str = "pccx",
    temperature: float = 0.0,
    top_p: float = DEFAULT_TOP_P,
    repetition_penalty: float = DEFAULT_PENALTY,
    seed: int = 0,
    policy: str | None = None,
    profile: Any = None,
    client: Any = None,
    scheduler: Any = None,
    progress: bool = False,
    fuse: bool = False,
    precision: str = DEFAULT_PRECISION,
    graph_for_position: Callable[[int], tuple] | None = None,
    on_step: Callable[..., None] | None = None,
    on_plan: Callable[..., None] | None = None,
    connect_timeout: float = CONNECT_TIMEOUT_S,
    run_step: Callable[..., np.ndarray] | None = None,
) -> ExecutedGeneration:
    """Generate `steps` tokens after `prompt_ids` by executing one decode graph per position.

    `weights` is an opened checkpoint. With `policy`, each step's tasks carry that policy's
    schedule (lanes and priorities) on `profile`. ``on_step(position, token_id, logits,
    seconds, state)`` is called after every decode step with the token that step read and
    the decode state after the step's KV rows were committed. ``on_plan(position,
    n_positions, graph, schedule)`` is called before each step runs (the dashboard's lanes
    page is told what is planned through it). ``fuse`` and ``precision``
    are passed to `execute` (fewer, larger tasks with the same numbers; float64 activations).
    ``run_step(graph, schedule, state, precision) -> logits``, when given, runs each step
    instead of `execute` and commits its KV rows into `state` (the emulator backend:
    `pccx_flow.board.emulator.backend.EmulatorSteps`).
    """
    semantics = check_semantics(semantics)
    precision = check_precision(precision)
    cfg = weights.config
    steps = check_steps(steps)
    prompt = check_prompt(cfg, prompt_ids, steps)
    n_positions = len(prompt) + steps - 1
    build = graph_for_position or default_graph_builder(
        cfg, semantics, policy=policy, profile=profile
    )
    ref = WeightsRef(weights)
    rng = np.random.default_rng(seed)
    state = new_decode_state(cfg, semantics, token_id=prompt[0])
    history = list(prompt)
    result = ExecutedGeneration()
    bar = _progress_bar(n_positions, progress)
    # One connection for the whole run when `scheduler` is an address.
    with connect(client, scheduler, connect_timeout) as dist:
        try:
            for position in range(n_positions):
                # the step's graph, plan and tasks live until it is done: the cyclic
                # collector would only rescan them (`pccx_flow.collector`)
                with collector_paused(collect_after=True):
                    t0 = time.perf_counter()
                    graph, schedule = build(position)
                    result.build_seconds.append(time.perf_counter() - t0)
                    token_in = state.token_id
                    if on_plan is not None:
                        on_plan(position, n_positions, graph, schedule)
                    t0 = time.perf_counter()
                    if run_step is not None:
                        logits = run_step(graph, schedule, state, precision)
                    else:
                        logits = execute(
                            graph,
                            ref,
                            state,
                            schedule=schedule,
                            client=dist,
                            scheduler=None if dist is not None else scheduler,
                            fuse=fuse,
                            precision=precision,
                        )
                    seconds = time.perf_counter() - t0
                    result.logits.append(logits)
                    result.step_seconds.append(seconds)
                    if on_step is not None:
                        on_step(position, token_in, logits, seconds, state)
                    del graph, schedule
                if bar is not None:
                    bar.update(1)
                if position + 1 < len(prompt):
                    state.token_id = prompt[position + 1]
                    continue
                token = sample_next_token(
                    logits,
                    history=history,
                    temperature=temperature,
                    top_p=top_p,
                    repetition_penalty=repetition_penalty,
                    rng=rng,
                )
                result.tokens.append(token)
                history.append(token)
                state.token_id = token
        finally:
            if bar is not None:
                bar.close()
    return result
