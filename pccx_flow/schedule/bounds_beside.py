"""A step's lower bounds computed in a second process while the policy schedules it.

`schedule` prints every lower bound of the step beside the schedule (`step_bounds`), and
on a long-context step the bounds cost about as much wall time as the policy: at position
8191 of E4B (31,415 nodes) about 1.3 s each on this machine. Neither needs the other, so on
a machine with a second core a forked child computes the bounds while the parent
schedules. The child inherits the problem by fork (nothing is sent to it) and sends back
the bounds as JSON, a few dozen names and integers; nothing it sends is unpickled
(`pccx_flow.schedule.sandbox`, which runs plugins the same way).

Nothing depends on the child: if it cannot start, dies or sends anything but a result, the
parent computes the bounds itself when they are asked for, with the same function, so the
numbers are the same and an error in them is raised where it always was. A small problem
(below `MIN_NODES`) or a single usable core is computed in-process from the start: there
the fork costs more than it saves.
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


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@contextmanager
def bounds_beside(
    problem: SchedulingProblem, profile: Any = None, *, min_nodes: int = MIN_NODES
) -> Iterator[Callable[[], dict[str, Any]]]:
    """Start computing ``step_bounds(problem, profile)`` beside the body; yields a function
    that returns them (waiting for the child, or computing them here: module docstring).
    The child is stopped when the body ends, however it ends."""
    child = reader = None
    if len(problem) >= min_nodes and usable_cores() >= 2:
        try:
            reader, child = start_child(lambda _progress: step_bounds(problem, profile))
        except (OSError, ValueError):  # no fork here (or no room for one): compute them here
            child = reader = None
    answer: list[dict[str, Any]] = []

    def bounds() -> dict[str, Any]:
        if not answer:
            got = _received(reader) if reader is not None else None
            answer.append(got if got is not None else step_bounds(problem, profile))
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
