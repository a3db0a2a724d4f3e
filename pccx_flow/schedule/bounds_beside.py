"""A step's lower bounds computed in a second process while the policy schedules it.

`schedule` prints every lower bound of the step beside the schedule (`step_bounds`), and
on a long-context step the bounds cost about as much wall time as the policy: at position
8191 of E4B (32,575 nodes) about 1 s each on this machine. Neither needs the other, so on
a machine with a second core a forked child computes the bounds while the parent
schedules. The child sends back the bounds as JSON, a few dozen names and integers;
nothing it sends is unpickled (`pccx_flow.schedule.sandbox`, which runs plugins the same
way).

`bounds_beside` forks once the problem is built: the child inherits it. `schedule` uses
`problem_and_bounds_beside`, which forks before: the child builds the problem itself from
the same graph while the parent does. A page the two processes share is copied when
either first writes to it (a reference count changing is a write), and a problem built
before the fork is shared whole; built after it, in a new process, each problem gets
pages of its own. At position 8191 the `schedule` command took 0.95x its wall time
(imports included; 10 alternated pairs, with `heft` and with `critical-path`) and 1.11x
its CPU time; the step in fresh processes 0.96x on `v002-spec` and 0.97x on
`v002-as-built` (`benchmarks/bench_speed_against.py`, 8 pairs). In a process that built
and freed a step before, the new problem lands in pages that were there before the fork,
and the gain is gone (1.00x).

Nothing depends on the child: if it cannot start, dies or sends anything but a result, the
parent computes the bounds itself when they are asked for, with the same function on its
own problem, so the numbers are the same and an error in them is raised where it always
was. A small problem (below `MIN_NODES`) or a single usable core is computed in-process
from the start: there the fork costs more than it saves.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pccx_flow.schedule.metrics import step_bounds
from pccx_flow.schedule.problem import SchedulingProblem
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
    that returns them (waiting for the child, or computing them here: module docstring).
    The child is stopped when the body ends, however it ends."""

    def here() -> dict[str, Any]:
        return step_bounds(problem, profile)

    with _beside(here, here, _worth_a_fork(len(problem), min_nodes)) as bounds:
        yield bounds


@contextmanager
def problem_and_bounds_beside(
    build: Callable[[], SchedulingProblem],
    profile: Any = None,
    *,
    nodes: int,
    min_nodes: int = MIN_NODES,
) -> Iterator[tuple[SchedulingProblem, Bounds]]:
    """``(build(), bounds)``: the problem built here, and a function returning its
    `step_bounds`, which a child forked before the build computes from a problem it builds
    itself (module docstring). `build` must give the same problem in both processes (a
    problem of `nodes` nodes, for the size test). The child is stopped when the body ends
    or the build fails."""
    built: list[SchedulingProblem] = []

    def in_child() -> dict[str, Any]:
        return step_bounds(build(), profile)

    def here() -> dict[str, Any]:
        return step_bounds(built[0], profile)

    with _beside(in_child, here, _worth_a_fork(nodes, min_nodes)) as bounds:
        built.append(build())
        yield built[0], bounds


def _worth_a_fork(nodes: int, min_nodes: int) -> bool:
    return nodes >= min_nodes and usable_cores() >= 2


@contextmanager
def _beside(
    in_child: Callable[[], dict[str, Any]], here: Callable[[], dict[str, Any]], fork: bool
) -> Iterator[Bounds]:
    """Run `in_child` in a forked child when `fork`; yields a function returning its
    answer, or `here`'s when there is none (no child, or it sent anything but a result)."""
    child = reader = None
    if fork:
        try:
            reader, child = start_child(lambda _progress: in_child())
        except (OSError, ValueError):  # no fork here (or no room for one): compute them here
            child = reader = None
    answer: list[dict[str, Any]] = []

    def bounds() -> dict[str, Any]:
        if not answer:
            got = _received(reader) if reader is not None else None
            answer.append(got if got is not None else here())
        return answer[0]

    try:
        yield bounds
    finally:
        if child is not None:
            reader.close()
            if child.is_alive():
                child.kill()
            child.join(5.0)


def _received(reader: Any) -> dict[str, Any] | None:
    """The child's bounds, or None when it sent anything else or nothing."""
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
