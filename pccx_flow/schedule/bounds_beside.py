"""A step's lower bounds computed in a second process while the policy schedules it.

`schedule` prints every lower bound of the step beside the schedule (`step_bounds`), and
on a long-context step the bounds cost about as much wall time as the policy: at position
8191 of E4B (32,575 nodes) about 1 s each on this machine. Neither needs the other, so on
a machine with a second core a forked child computes the bounds while the parent
schedules, in two parts sent one after the other: the chain bounds (`step_chain_bounds`,
~0.9 of that second), then the others (`step_other_bounds`, ~0.1 s). When the parent asks
for the bounds before the chain bounds came, it computes the others itself, then waits
for the chain bounds; after, the child is on the others, and the parent waits for them.
At 8191 after `heft` the parent asked 0.1-0.25 s before the child's whole answer came,
and its share of the work saves about that wait. The child's parts are JSON, a few names
and integers; nothing it sends is unpickled (`pccx_flow.schedule.sandbox`, which runs
plugins the same way).

`bounds_beside` forks once the problem is built: the child inherits it.
`problem_and_bounds_beside` forks before: the child builds a problem itself from the
same graph while the parent does; `schedule` has it build the hardware problem
(`step_problem_and_bounds`), which has the same bounds and costs less to build. A page
the two processes share is copied when either first writes to it (a reference count
changing is a write), and a problem built before the fork is shared whole; built after
it, in a new process, each problem gets pages of its own. At position 8191 the
`schedule` command took 0.95x its wall time (imports included; 10 alternated pairs, with
`heft` and with `critical-path`) and 1.11x its CPU time; the step in fresh processes
0.96x on `v002-spec` and 0.97x on `v002-as-built` (`benchmarks/bench_speed_against.py`,
8 pairs). In a process that built and freed a step before, the new problem lands in
pages that were there before the fork, and the gain is gone (1.00x).

Nothing depends on the child: if it cannot start, dies or sends anything but a result,
the parent computes the parts it lacks itself when the bounds are asked for, with the
same functions (the chain bounds on a problem built as the child built its own), so the
numbers are the same and an error in them is raised where it always was. A small problem
(below `MIN_NODES`) or a single usable core is computed in-process from the start: there
the fork costs more than it saves.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pccx_flow.schedule.metrics import step_bounds, step_chain_bounds, step_other_bounds
from pccx_flow.schedule.problem import SchedulingProblem, problem_from_graph
from pccx_flow.schedule.sandbox import RESULT_TAG, start_child

# Below this many nodes the bounds take under ~0.2 s on this machine (E4B's first 12 layers
# at position 1023: 5,200 nodes, 0.19 s; the whole step at position 0: 13,495 nodes, 0.34 s),
# and a fork with the pages it copies would save little.
MIN_NODES = 5_000

Bounds = Callable[[], dict[str, Any]]


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@contextmanager
def bounds_beside(
    problem: SchedulingProblem, profile: Any = None, *, min_nodes: int = MIN_NODES
) -> Iterator[Bounds]:
    """Start computing ``step_bounds(problem, profile)`` beside the body; yields a function
    that returns them (the child's parts, or computed here: module docstring). The child
    is stopped when the body ends, however it ends."""

    with _beside(lambda: _parts(problem, profile), _worth_a_fork(len(problem), min_nodes)) as parts:
        yield functools.cache(lambda: _assembled(problem, profile, parts))


@contextmanager
def problem_and_bounds_beside(
    build: Callable[[], SchedulingProblem],
    profile: Any = None,
    *,
    nodes: int,
    min_nodes: int = MIN_NODES,
    build_hardware: Callable[[], SchedulingProblem] | None = None,
) -> Iterator[tuple[SchedulingProblem, Bounds]]:
    """``(build(), bounds)``: the problem built here, and a function returning its
    `step_bounds`, which a child forked before the build computes from a problem it builds
    itself (module docstring). `build` must give the same problem in both processes (a
    problem of `nodes` nodes, for the size test). With `build_hardware` the bounds are
    those of the problem it builds instead, the same problem's hardware problem
    (`SchedulingProblem.without_order_edges`; `problem_from_graph(..., hardware=True)`,
    which skips the read-ahead rule the bounds leave out): the child builds that one, and
    so does this process if it must compute the chain bounds itself (no child, or a
    failed one), so the numbers never depend on whether the fork worked. A
    ``capacity_chain`` bound walks the problem's node order, which the read-ahead edges
    can change (on every decode step checked the two problems' bounds are the same);
    the other bounds are sums and longest paths over the same holds, costs and data
    edges, the same on both problems, and are computed here on the problem built here.
    The child is stopped when the body ends or the build fails."""
    in_child = build_hardware or build
    # here only if the chain bounds are computed here, and then once
    for_chains = functools.cache(build_hardware) if build_hardware is not None else None

    # the child builds its problem when it starts (`_beside` calls this there)
    with _beside(lambda: _parts(in_child(), profile), _worth_a_fork(nodes, min_nodes)) as parts:
        problem = build()
        yield problem, functools.cache(lambda: _assembled(problem, profile, parts, for_chains))


@contextmanager
def step_problem_and_bounds(
    graph: Any,
    profile: Any,
    *,
    memory: bool = True,
    read_ahead: Any = None,
    min_nodes: int = MIN_NODES,
) -> Iterator[tuple[SchedulingProblem, Bounds]]:
    """`problem_and_bounds_beside` for a decode graph, as `schedule` runs its step: the
    problem `problem_from_graph` makes of it here (within L2 with `memory`, by the
    `read_ahead` rule), and the bounds of its hardware problem (0.79x the build at 8191),
    which the child builds."""
    with problem_and_bounds_beside(
        lambda: problem_from_graph(graph, profile, memory=memory, read_ahead=read_ahead),
        profile,
        nodes=len(graph),
        min_nodes=min_nodes,
        build_hardware=lambda: problem_from_graph(graph, profile, memory=memory, hardware=True),
    ) as pair:
        yield pair


def _parts(problem: SchedulingProblem, profile: Any) -> Iterator[dict[str, Any]]:
    """What the child sends, in turn: the chain bounds, then the others."""
    yield step_chain_bounds(problem)
    yield step_other_bounds(problem, profile)


def _worth_a_fork(nodes: int, min_nodes: int) -> bool:
    return nodes >= min_nodes and usable_cores() >= 2


class _Parts:
    """The parts a child sends one after the other (`_parts`: the chain bounds, then the
    others), read when asked for; none once it sent anything but a result, when
    there is no child, or once the body has ended (`_beside`)."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.got: list[dict[str, Any]] = []
        self.broken = reader is None

    def get(self, k: int, *, wait: bool) -> dict[str, Any] | None:
        """Part `k` (0 first), waiting for it if `wait`, else only if it has come."""
        while len(self.got) <= k and not self.broken:
            if not wait and not self.reader.poll(0):
                return None
            part = _received(self.reader)
            if part is None:
                self.broken = True
            else:
                self.got.append(part)
        return self.got[k] if k < len(self.got) else None


def _assembled(
    problem: SchedulingProblem,
    profile: Any,
    parts: _Parts,
    for_chains: Callable[[], SchedulingProblem] | None = None,
) -> dict[str, Any]:
    """`step_bounds` of `problem` from the child's parts and what is computed here (module
    docstring): the chain bounds, if computed here, on ``for_chains()`` when given (the
    problem the child computes them on). Once the chain bounds came the child is on the
    others and sends them no later than they would be made here: they are waited for.
    Before, the others are computed here, and then the chain bounds waited for. A part
    the child never sends is computed here."""
    chains = parts.get(0, wait=False)
    others = parts.get(1, wait=True) if chains is not None else None
    if others is None:
        others = step_other_bounds(problem, profile)
    if chains is None:
        chains = parts.get(0, wait=True)
    if chains is None:
        chains = step_chain_bounds(for_chains() if for_chains is not None else problem)
    return step_bounds(problem, profile, chains=chains, others=others)


@contextmanager
def _beside(in_child: Callable[[], Iterator[dict[str, Any]]], fork: bool) -> Iterator[_Parts]:
    """Run `in_child` in a forked child when `fork`; yields its parts as they come
    (`_Parts`: none without a child)."""
    child = reader = None
    if fork:
        try:
            reader, child = start_child(lambda _progress: in_child())
        except (OSError, ValueError):  # no fork here (or no room for one): compute them here
            child = reader = None
    parts = _Parts(reader)
    try:
        yield parts
    finally:
        parts.broken = True  # asked after the body: nothing more is read, the rest is made here
        if child is not None:
            reader.close()
            if child.is_alive():
                child.kill()
            child.join(5.0)


def _received(reader: Any) -> dict[str, Any] | None:
    """The child's next part, or None when it sent anything else or nothing."""
    try:
        message = reader.recv_bytes()
    except (EOFError, OSError):
        return None
    if message[:1] != RESULT_TAG:
        return None
    try:
        out = json.loads(message[1:])
    except ValueError:  # cut short: the parent computes them
        return None
    return out if isinstance(out, dict) else None
