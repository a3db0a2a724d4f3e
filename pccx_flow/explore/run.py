"""Evaluate a sweep's points: check every profile, reuse the cache, run the rest on Dask.

Before anything is scheduled, every point's profile is built and checked
(`pccx_flow.hardware.profile.load_profile_with`), and its position and tile size against
the model (`check_position`, `check_tile_rows`: a tile holds whole heads): one implausible
point refuses the sweep in one line naming the point, as ``--profile`` refuses a bad file,
instead of each such point failing on its own after the sweep ran. The points not in the cache
run as Dask tasks on the engine `compare` uses (`pccx_flow.compare.sweep.run_on_dask`: local
worker processes on 127.0.0.1, or ``--scheduler tcp://...``), or in this process with
``workers=0``. Each record is cached as it lands, so a killed sweep resumes where it stopped.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from pccx_flow.errors import InputError, ProfileError
from pccx_flow.explore.cache import Cache
from pccx_flow.explore.params import profile_overrides, split_point
from pccx_flow.explore.point import derive, evaluate, step_key


def describe(point: dict[str, Any]) -> str:
    """``gemv_lanes=8, core_mhz=500`` (or ``base``)."""
    return ", ".join(f"{k}={_short(v)}" for k, v in point.items()) or "base"


def _short(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def make_tasks(points: list[dict], base_profile: str, preset: str, policies: list[str],
               memory: bool, replay: str | None = None, seed: int = 0) -> list[dict]:  # fmt: skip
    """One plain-data task per point, its profile checked (module docstring); `seed` goes
    to the policies that take one (``random``, ``NAME+improve:R``) and into the cache key."""
    from pccx_flow.graph.build import check_tile_rows
    from pccx_flow.hardware.profile import load_profile, load_profile_with
    from pccx_flow.model.config import check_position, get_config

    base = load_profile(base_profile)
    config = get_config(preset)
    last = config.max_seq - 1
    tasks = []
    for i, point in enumerate(points):
        overrides, step, after = split_point(point)
        if "position" not in point:  # the default position, capped as `schedule` caps it
            step["position"] = min(step["position"], last)
        try:
            check_position(config, step["position"])
            check_tile_rows(config, step["tile_rows"])
        except InputError as exc:
            raise InputError(f"point {i} ({describe(point)}) refused: {exc}") from None
        overrides = profile_overrides(base, overrides)
        hw = {k: v for k, v in point.items() if k not in step and k not in after}
        name = f"{base.name} with {describe(hw)}" if hw else base.name
        try:
            profile = load_profile_with(base_profile, overrides, name)
        except ProfileError as exc:
            raise ProfileError(f"point {i} ({describe(point)}) refused: {exc}") from None
        tasks.append({
            "key": step_key(profile.to_dict(), step, policies, memory, preset, replay, seed),
            "point": point, "base_profile": base_profile, "overrides": overrides,
            "name": name, "preset": preset, "step": step, "after": after,
            "policies": list(policies), "memory": memory, "replay": replay, "seed": seed,
        })  # fmt: skip
    return tasks


def run_points(
    tasks: list[dict],
    cache: Cache,
    *,
    scheduler: str | None = None,
    workers: int = 2,
    progress: bool = True,
    on_record: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Every task's derived record, in task order (cached ones reused, failures recorded)."""
    from tqdm import tqdm

    done: dict[str, dict] = {}
    for t in tasks:
        hit = cache.get(t["key"])
        if hit is not None:
            done[t["key"]] = hit
    todo, seen = [], set(done)
    for t in tasks:
        if t["key"] not in seen:
            seen.add(t["key"])
            todo.append(t)
    # points of one step shape next to each other, so a worker reuses its shaped graph
    # (`build_point_graph`); records still come back in task order
    todo.sort(key=lambda t: json.dumps(t["step"], sort_keys=True))
    bar = tqdm(total=len(seen), initial=len(seen) - len(todo), desc="explore", unit="pt",
               file=sys.stderr, disable=not progress, dynamic_ncols=True)  # fmt: skip

    def landed(rec: dict) -> None:
        done[rec["key"]] = rec
        cache.put(rec)
        bar.update()
        if on_record is not None:
            on_record(rec)

    try:
        if todo and workers == 0 and scheduler is None:
            for t in todo:
                landed(evaluate(t))
        elif todo:
            from pccx_flow.compare.sweep import run_on_dask

            jobs = [((t,), f"explore-{t['key'][:16]}") for t in todo]
            run_on_dask(evaluate, jobs, {}, scheduler=scheduler, workers=workers,
                        landed=landed)  # fmt: skip
    finally:
        bar.close()
    return [{**derive(done[t["key"]], t["after"]), "point": t["point"]} for t in tasks]
