"""Find a policy by name and run it, treating third-party policies as untrusted.

Three ways to name a policy:

- a built-in name (``critical-path``, ``heft``, ...; `BUILTIN_POLICIES`);
- an entry point in group ``pccx_flow.schedulers`` of any installed distribution
  (see ``schedulers/`` at the repository root for a complete example);
- ``package.module:ClassName`` for a class importable from ``sys.path``.

`run_policy` runs the policy on a fresh timeline and hands the result to the validator. A
policy that raises, returns something it should not, or leaves nodes unscheduled becomes a
one-line `PolicyError` naming it and what it did, never a traceback or a half schedule.

Plugins (every name that is not built in) are imported, built and run only in a child
process under a time limit (`pccx_flow.schedule.sandbox`): one that exits, hangs or raises a
`BaseException` at import or while scheduling ends in the same one-line `PolicyError`, and
`list_policies` lists a plugin that cannot be loaded as broken instead of failing.
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from typing import Any

import networkx as nx

from pccx_flow.errors import PccxFlowError, PolicyError, ScheduleError
from pccx_flow.schedule.improve import DEFAULT_ROUNDS, improve_schedule
from pccx_flow.schedule.model import Schedule, Slot
from pccx_flow.schedule.policies.base import Policy
from pccx_flow.schedule.policies.cpop import Cpop
from pccx_flow.schedule.policies.critical_path import CriticalPath
from pccx_flow.schedule.policies.dls import Dls
from pccx_flow.schedule.policies.etf import Etf
from pccx_flow.schedule.policies.heft import Heft
from pccx_flow.schedule.policies.lookahead import Lookahead
from pccx_flow.schedule.policies.min_min import MinMin
from pccx_flow.schedule.policies.program_order import ProgramOrder
from pccx_flow.schedule.policies.random_order import RandomOrder
from pccx_flow.schedule.problem import SchedulingProblem, problem_from_graph
from pccx_flow.schedule.sandbox import LOAD_TIMEOUT, check_timeout, default_timeout, run_in_child
from pccx_flow.schedule.timeline import BusyIntervals, Timeline
from pccx_flow.schedule.validate import validate_schedule

ENTRY_POINT_GROUP = "pccx_flow.schedulers"
DEFAULT_POLICY = "critical-path"
# ``heft+improve``: the policy's schedule, then `pccx_flow.schedule.improve` (any policy);
# ``heft+improve:50``: 50 rounds of the seeded, randomised form of that pass
IMPROVE_SUFFIX = "+improve"
IMPROVE_NOISE = 0.1  # shift of a perturbed round's starts, as a share of the makespan

BUILTIN_POLICIES: dict[str, type[Policy]] = {
    cls.name: cls
    for cls in (
        ProgramOrder,
        RandomOrder,
        CriticalPath,
        Heft,
        Cpop,
        Etf,
        Dls,
        MinMin,
        Lookahead,
    )
}


def _one_line(exc: BaseException, limit: int = 240) -> str:
    """A plugin's exception text on one line (errors reach the user as a single line)."""
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def plugin_entry_points() -> dict[str, Any]:
    """Installed entry points of group ``pccx_flow.schedulers`` by name (not yet loaded)."""
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def list_policies() -> list[tuple[str, str, str]]:
    """(name, origin, description) of every policy: built-ins first, then plugins.

    A plugin that cannot be loaded is listed with its load error as the description.
    """
    rows = [(name, "built-in", cls.description) for name, cls in BUILTIN_POLICIES.items()]
    for name, ep in sorted(plugin_entry_points().items()):
        if name in BUILTIN_POLICIES:
            continue
        try:  # in a child: a plugin that exits or hangs at import must not break --list
            desc = run_in_child(
                lambda _progress, ep=ep: str(getattr(ep.load(), "description", "") or ""),
                label=name,
                timeout=LOAD_TIMEOUT,
            )
        except PolicyError as exc:
            desc = f"(cannot be loaded: {str(exc).removeprefix(f'policy {name} raised ')})"
        rows.append((name, f"plugin {ep.value}", str(desc)))
    return rows


def _known_names() -> str:
    return ", ".join(
        [*BUILTIN_POLICIES, *sorted(set(plugin_entry_points()) - set(BUILTIN_POLICIES))]
    )


def _import_from_the_current_folder() -> None:
    """Let ``mypkg.sched:MyPolicy`` find ``./mypkg`` as ``python -m`` would.

    The console script's ``sys.path`` starts with its own folder, not the current one, so a
    policy package beside the user was not importable without ``PYTHONPATH=.``.
    """
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)


def load_policy_class(spec: str) -> Any:
    """The policy class (or factory) that `spec` names; `PolicyError` if there is none."""
    if spec in BUILTIN_POLICIES:
        return BUILTIN_POLICIES[spec]
    eps = plugin_entry_points()
    if spec in eps:
        try:
            return eps[spec].load()
        except Exception as exc:
            raise PolicyError(
                f"policy plugin {spec!r} ({eps[spec].value}) failed to load: "
                f"{type(exc).__name__}: {_one_line(exc)}"
            ) from exc
    if ":" in spec:
        module_name, _, attr = spec.partition(":")
        _import_from_the_current_folder()
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise PolicyError(
                f"cannot import policy module {module_name!r} from {spec!r}: "
                f"{type(exc).__name__}: {_one_line(exc)}"
            ) from exc
        obj = module
        for part in attr.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                raise PolicyError(f"module {module_name!r} has no attribute {attr!r}")
        return obj
    from pccx_flow.suggest import did_you_mean

    hint = did_you_mean(spec, [*BUILTIN_POLICIES, *plugin_entry_points()])
    raise PolicyError(
        f"unknown policy {spec!r}{hint}; choose one of: {_known_names()} "
        f"(or give package.module:ClassName)"
    )


@dataclass(frozen=True)
class ImprovedPolicy:
    """A policy (instance or `PluginPolicy`) whose validated schedule is then tightened by
    forward-backward improvement (`pccx_flow.schedule.improve`) and validated again.

    ``NAME+improve`` is the deterministic pass (a few rounds, until one does not help);
    ``NAME+improve:R`` tries all R rounds, perturbing the order after a round that did not
    help (noise `IMPROVE_NOISE`, seeded by the run's seed): slower, and on compare's small
    random DAGs closer to the optimum.
    """

    inner: Any
    base: str
    rounds: int = DEFAULT_ROUNDS
    noise: float = 0.0
    seed: int = 0

    @property
    def label(self) -> str:
        return self.base + IMPROVE_SUFFIX + (f":{self.rounds}" if self.noise else "")

    @property
    def description(self) -> str:
        inner = str(getattr(self.inner, "description", "") or self.base)
        return f"{inner}, then forward-backward improvement"


def split_improve(spec: str) -> tuple[str, int | None] | None:
    """(base policy, rounds or None) of ``BASE+improve[:ROUNDS]``; None for any other spec."""
    head, sep, tail = spec.rpartition(IMPROVE_SUFFIX)
    if not sep or not head or (tail and not tail.startswith(":")):
        return None
    if not tail:
        return head, None
    try:
        rounds = int(tail[1:])
    except ValueError:
        rounds = 0
    if rounds < 1:
        raise PolicyError(
            f"{spec!r}: the rounds after {IMPROVE_SUFFIX}: must be a whole number >= 1, "
            f"e.g. {head}{IMPROVE_SUFFIX}:50"
        )
    return head, rounds


def _improved(inner: Any, base: str, rounds: int | None, seed: int) -> ImprovedPolicy:
    if rounds is None:
        return ImprovedPolicy(inner, base)
    return ImprovedPolicy(inner, base, rounds=rounds, noise=IMPROVE_NOISE, seed=seed)


def make_policy(spec: str, *, seed: int = 0, **options: Any) -> Any:
    """An instance of the policy `spec` names, built with the options its constructor takes.

    `seed` is passed only to policies that take one (the CLI always has a seed); any other
    option the constructor does not take is a `PolicyError`. ``NAME+improve`` gives an
    `ImprovedPolicy` around NAME's instance.
    """
    improve = split_improve(spec)
    if improve is not None:
        base, rounds = improve
        return _improved(make_policy(base, seed=seed, **options), base, rounds, seed)
    cls = load_policy_class(spec)
    if not inspect.isclass(cls):
        raise PolicyError(
            f"policy {spec!r} is a {type(cls).__name__}, not a class; a policy is a class with "
            f"name, description and schedule(problem, timeline)"
        )
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        params = {}
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    unknown = sorted(k for k in options if k not in params and not takes_any)
    if unknown:
        raise PolicyError(
            f"policy {spec!r} takes no option {unknown[0]!r}; it takes: "
            f"{', '.join(k for k in params if k != 'self') or 'no options'}"
        )
    kwargs = dict(options)
    if "seed" in params or takes_any:
        kwargs["seed"] = seed
    try:
        policy = cls(**kwargs)
    except Exception as exc:
        raise PolicyError(
            f"policy {spec!r} could not be created: {type(exc).__name__}: {_one_line(exc)}"
        ) from exc
    if not callable(getattr(policy, "schedule", None)):
        raise PolicyError(
            f"policy {spec!r} ({cls.__name__}) has no schedule(problem, timeline) method"
        )
    return policy


@dataclass(frozen=True)
class PluginPolicy:
    """A third-party policy named by `spec`, to be built and run only in a child process.

    `timeout` is the time limit of one run in seconds (None: `default_timeout` of the
    problem's size). The parent never imports the plugin; `description` was read by a child.
    """

    spec: str
    seed: int = 0
    options: dict = field(default_factory=dict)
    timeout: float | None = None
    description: str = ""

    def build(self) -> Any:
        """The policy instance (call this in the child only)."""
        return make_policy(self.spec, seed=self.seed, **self.options)


def prepare_policy(
    spec: str, *, seed: int = 0, timeout: float | None = None, **options: Any
) -> Any:
    """A policy ready for `run_on_problem`, checked before any slow work.

    Built-in names give an instance (run in-process); any other name is loaded and built
    once in a child process (so a broken plugin fails now, with one line) and gives a
    `PluginPolicy` that is run in a child under `timeout` seconds.
    """
    timeout = check_timeout(timeout)
    improve = split_improve(spec)
    if improve is not None:
        base, rounds = improve
        inner = prepare_policy(base, seed=seed, timeout=timeout, **options)
        return _improved(inner, base, rounds, seed)
    if spec in BUILTIN_POLICIES:
        return make_policy(spec, seed=seed, **options)
    plugin = PluginPolicy(spec, seed, dict(options), timeout)
    description = run_in_child(
        lambda _progress: str(getattr(plugin.build(), "description", "") or ""),
        label=spec,
        timeout=LOAD_TIMEOUT if timeout is None else min(timeout, LOAD_TIMEOUT),
    )
    return PluginPolicy(spec, seed, dict(options), timeout, str(description))


def _whole_cycles(value: Any) -> int | None:
    """`value` as an int when it is a whole, non-negative number (``3``, ``3.0``, numpy
    integers); None for ``0.5``, ``-1``, NaN or a bool (int() would silently truncate)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Integral):
        return int(value) if value >= 0 else None
    if isinstance(value, numbers.Real):
        f = float(value)
        return int(f) if math.isfinite(f) and f.is_integer() and f >= 0 else None
    raise TypeError(f"start {value!r} is not a number")


def _slots_from_mapping(result: Mapping, problem: SchedulingProblem, label: str) -> dict[Any, Slot]:
    """Turn a policy's own ``{node: (lane, start)}`` answer into slots.

    Pool instances are handed out here, first free instance at the node's start; when every
    instance is taken the node is given the first one and the validator reports the clash.
    """
    slots = {}
    instances = {
        pool: [(f"{pool}{i}", BusyIntervals()) for i in range(count)]
        for pool, count in problem.pools.items()
    }
    for node, placement in result.items():
        try:
            lane, start = placement
            whole = _whole_cycles(start)
            cost = problem.costs[node][lane]
        except Exception as exc:
            raise PolicyError(
                f"policy {label} returned {placement!r} for node {node!r}; expected "
                f"(lane, start) with a lane that can run the node"
            ) from exc
        if whole is None:
            raise PolicyError(
                f"policy {label} returned start {start!r} for node {node!r}; a start is a "
                "whole, non-negative number of cycles (round it up)"
            )
        start = whole
        held = []
        for pool in problem.resources.get(node, ()):
            free = [
                (name, busy) for name, busy in instances[pool] if busy.fit(start, cost) == start
            ]
            name, busy = free[0] if free else instances[pool][0]
            busy.add(start, start + cost)
            held.append(name)
        slots[node] = Slot(node, lane, start, start + cost, tuple(held))
    return slots


def run_on_problem(
    policy: Any,
    problem: SchedulingProblem,
    *,
    label: str,
    profile: str,
    on_place: Callable[[Slot], None] | None = None,
) -> Schedule:
    """Run one policy on `problem`; always returns a validated schedule.

    `policy` is an instance (run here) or a `PluginPolicy` (run in a child under its time
    limit). `on_place` is called with each slot as the policy places it (a progress bar);
    for a plugin it is called once per placed node with None (the child keeps the slots).
    An `ImprovedPolicy` runs its inner policy so, then the improvement pass.
    """
    if isinstance(policy, ImprovedPolicy):
        first = run_on_problem(
            policy.inner, problem, label=label, profile=profile, on_place=on_place
        )
        schedule = improve_schedule(
            first, problem, rounds=policy.rounds, noise=policy.noise, seed=policy.seed
        )
    elif isinstance(policy, PluginPolicy):
        schedule = _run_plugin(policy, problem, label=label, profile=profile, on_place=on_place)
    else:
        schedule = _run_unchecked(policy, problem, label=label, profile=profile, on_place=on_place)
    try:
        validate_schedule(schedule, problem)
    except ScheduleError as exc:
        raise PolicyError(f"policy {label} produced an invalid schedule: {_one_line(exc)}") from exc
    return schedule


def _run_plugin(
    plugin: PluginPolicy,
    problem: SchedulingProblem,
    *,
    label: str,
    profile: str,
    on_place: Callable[[Slot], None] | None,
) -> Schedule:
    """Run `plugin` in a child; rebuild its schedule from the plain rows the child sends."""
    nodes = list(problem.graph.nodes)
    step = max(1, len(nodes) // 100)

    def job(progress: Callable[[int], None]) -> list:
        pending = 0

        def placed(_slot: Slot) -> None:
            nonlocal pending
            pending += 1
            if pending >= step:
                progress(pending)
                pending = 0

        schedule = _run_unchecked(
            plugin.build(), problem, label=label, profile=profile, on_place=placed
        )
        index = {node: i for i, node in enumerate(nodes)}
        return [
            [index[s.node], s.lane, s.start, s.finish, list(s.resources)]
            for s in schedule.slots.values()
        ]

    done = 0

    def progressed(count: int) -> None:
        nonlocal done
        if on_place is not None:
            for _ in range(max(0, min(count, len(nodes)) - done)):
                on_place(None)  # type: ignore[arg-type]
        done = max(done, count)

    timeout = plugin.timeout if plugin.timeout is not None else default_timeout(len(nodes))
    rows = run_in_child(job, label=label, timeout=timeout, on_progress=progressed)
    return Schedule(label, profile, problem.lanes, _slots_from_rows(rows, nodes, label))


def _slots_from_rows(rows: Any, nodes: list, label: str) -> dict[Any, Slot]:
    """Slots from a child's ``[[node index, lane, start, finish, [pool instances]], ...]``."""
    slots: dict[Any, Slot] = {}
    if not isinstance(rows, list):
        raise PolicyError(f"policy {label} sent a malformed schedule")
    for row in rows:
        ok = isinstance(row, list) and len(row) == 5
        if ok:
            i, lane, start, finish, held = row
            ok = (
                all(isinstance(v, int) and not isinstance(v, bool) for v in (i, start, finish))
                and 0 <= i < len(nodes)
                and isinstance(lane, str)
                and isinstance(held, list)
                and all(isinstance(h, str) for h in held)
                and nodes[i] not in slots
            )
        if not ok:
            raise PolicyError(f"policy {label} sent a malformed schedule row {str(row)[:80]}")
        slots[nodes[i]] = Slot(nodes[i], lane, start, finish, tuple(held))
    return slots


def _run_unchecked(
    policy: Any,
    problem: SchedulingProblem,
    *,
    label: str,
    profile: str,
    on_place: Callable[[Slot], None] | None,
) -> Schedule:
    """The schedule `policy` makes of `problem`, not yet validated."""
    timeline = Timeline(problem)
    timeline.on_place = on_place
    try:
        result = policy.schedule(problem, timeline)
    except PccxFlowError as exc:
        raise PolicyError(f"policy {label} failed: {_one_line(exc)}") from exc
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - sys.exit(), GeneratorExit, ... in a policy
        what = f"{type(exc).__name__}: {_one_line(exc)}" if str(exc) else type(exc).__name__
        raise PolicyError(f"policy {label} raised {what}") from exc
    if result is None:
        missing = timeline.unplaced()
        if missing:
            raise PolicyError(
                f"policy {label} left {len(missing)} of {len(problem)} nodes unscheduled "
                f"(first: {missing[0]!r})"
            )
        schedule = timeline.to_schedule(label, profile)
    elif isinstance(result, Mapping):
        schedule = Schedule(
            label, profile, problem.lanes, _slots_from_mapping(result, problem, label)
        )
    else:
        raise PolicyError(
            f"policy {label} returned a {type(result).__name__}; schedule() must place nodes "
            f"through the timeline and return None (or return {{node: (lane, start)}})"
        )
    return schedule


def run_policy(
    graph_or_problem: nx.DiGraph | SchedulingProblem,
    profile: Any = None,
    policy: str | Any = DEFAULT_POLICY,
    *,
    seed: int = 0,
    policy_timeout: float | None = None,
    **options: Any,
) -> Schedule:
    """Schedule a decode graph (with a profile) or a ready-made problem with one policy.

    `seed` and `options` go to the policy's constructor (see `make_policy`). A plugin named
    by string runs in a child process, stopped after `policy_timeout` seconds (default:
    `pccx_flow.schedule.sandbox.default_timeout` of the problem's size).

    `policy` is a name (see module docstring) or a policy instance. The schedule returned has
    passed `validate_schedule`.

    >>> from pccx_flow.schedule.model import Lane
    >>> g = nx.DiGraph([("a", "b")])
    >>> p = SchedulingProblem(g, [Lane("x", "cpu")], {"a": {"x": 2}, "b": {"x": 3}})
    >>> run_policy(p, policy="heft").makespan
    5
    """
    if isinstance(graph_or_problem, SchedulingProblem):
        problem = graph_or_problem
        profile_name = getattr(profile, "name", profile) or problem.name or "problem"
    else:
        if profile is None:
            raise PolicyError("scheduling a decode graph needs a hardware profile (name or file)")
        if isinstance(profile, str):
            from pccx_flow.hardware.profile import load_profile

            profile = load_profile(profile)
        problem = problem_from_graph(graph_or_problem, profile)
        profile_name = profile.name
    if isinstance(policy, str):
        label = policy
        instance = prepare_policy(policy, seed=seed, timeout=policy_timeout, **options)
    elif isinstance(policy, PluginPolicy):
        label = policy.spec
        instance = policy if policy_timeout is None else replace(policy, timeout=policy_timeout)
    elif isinstance(policy, ImprovedPolicy):
        label, instance = policy.label, policy
    else:
        instance = policy
        label = str(getattr(policy, "name", "") or type(policy).__name__)
        if not callable(getattr(instance, "schedule", None)):
            raise PolicyError(f"policy {label} has no schedule(problem, timeline) method")
    return run_on_problem(instance, problem, label=label, profile=str(profile_name))
