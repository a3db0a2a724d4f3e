"""The instances of a sweep: each named by a small JSON-ready dict, built where it runs.

A sweep ships these descriptors (not graphs) to Dask workers; each worker builds its own
problem, so nothing big crosses the wire and a journal line names its instance exactly.

- ``decode``: one decode step (preset, semantics, position, layers, tile rows) costed on a
  hardware profile. Its makespans are model estimates on that profile.
- ``random``: `families.random_dag(family, n, seed, pools=...)`.
- ``dag``: a user's DAG file (`pccx_flow.schedule.dagfile`).
"""

from __future__ import annotations

from typing import Any

from pccx_flow.errors import InputError
from pccx_flow.schedule.problem import SchedulingProblem


def decode_instance(
    profile: str,
    position: int,
    *,
    preset: str = "e4b",
    semantics: str = "pccx",
    layers: tuple[int, int] | None = None,
    tile_rows: int = 512,
    memory: bool = True,
    read_ahead: str | None = None,
) -> dict:
    """A decode step, scheduled as `schedule` schedules it: within the profile's L2 (and SFU
    reach) unless `memory` is False, its KV reads by `read_ahead` (``stream`` or ``fixed``:
    `pccx_flow.schedule.readahead`; None: `DEFAULT_READ_AHEAD`). The key says "/l2" for the
    limited problem and "/l2/stream" under the stream rule, so a journal written before the
    limit existed (keys without it) resumes as the unlimited problem it was, and one
    written when the fixed rules were the default ("/l2") as the fixed rules' problem."""
    from pccx_flow.schedule.readahead import DEFAULT_READ_AHEAD

    read_ahead = read_ahead or DEFAULT_READ_AHEAD
    key = f"decode/{preset}/{semantics}/{profile}/pos{position}"
    if layers is not None:
        key += f"/layers{layers[0]}:{layers[1]}"
    if tile_rows != 512:
        key += f"/tile{tile_rows}"
    if memory:
        key += "/l2" if read_ahead == "fixed" else f"/l2/{read_ahead}"
    return {
        "key": key,
        "kind": "decode",
        "profile": profile,
        "position": position,
        "preset": preset,
        "semantics": semantics,
        "layers": list(layers) if layers else None,
        "tile_rows": tile_rows,
        "memory": memory,
        "read_ahead": read_ahead if memory else None,
    }


def random_instance(family: str, n: int, seed: int, *, pools: bool = True) -> dict:
    suffix = "" if pools else "/nopool"
    return {
        "key": f"random/{family}/n{n}/s{seed}{suffix}",
        "kind": "random",
        "family": family,
        "n": n,
        "seed": seed,
        "pools": pools,
    }


def dag_instance(path: str) -> dict:
    return {"key": f"dag/{path}", "kind": "dag", "path": str(path)}


def parse_dags(text: str, *, seed: int = 0, pools: bool = True) -> list[tuple[str, Any]]:
    """``decode,random:200,file:my.json`` -> [("decode", None), ("random", [...]), ...]."""
    from pccx_flow.compare.families import random_sizes

    out: list[tuple[str, Any]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        head, _, arg = part.partition(":")
        if head == "decode" and not arg:
            out.append(("decode", None))
        elif head == "random":
            try:
                count = int(arg)
            except ValueError:
                raise InputError(f"--dags {part!r}: write random:COUNT, e.g. random:200") from None
            if count < 1:
                raise InputError(f"--dags {part!r}: COUNT must be at least 1")
            out.append(
                ("random", [random_instance(f, n, i, pools=pools)
                            for i, (f, n) in enumerate(random_sizes(count, seed))])
            )  # fmt: skip
        elif head in ("file", "dag") and arg:
            out.append(("dag", [dag_instance(arg)]))
        else:
            raise InputError(
                f"--dags {part!r}: use decode, random:COUNT or file:PATH (comma-separated)"
            )
    if not out:
        raise InputError("--dags is empty; give e.g. decode,random:200")
    return out


def build_problem(desc: dict) -> tuple[SchedulingProblem, Any]:
    """(problem, hardware profile or None) of one instance descriptor."""
    kind = desc["kind"]
    if kind == "decode":
        from pccx_flow.graph.build import build_decode_graph
        from pccx_flow.hardware.profile import load_profile
        from pccx_flow.model.config import get_config
        from pccx_flow.schedule.problem import problem_from_graph

        profile = load_profile(desc["profile"])
        graph = build_decode_graph(
            get_config(desc["preset"]),
            semantics=desc["semantics"],
            position=desc["position"],
            profile=profile,
            tile_rows=desc["tile_rows"],
            layers=tuple(desc["layers"]) if desc.get("layers") else None,
        )
        memory = desc.get("memory", False)
        rule = {"rule": desc.get("read_ahead") or "fixed"} if memory else None
        return problem_from_graph(graph, profile, memory=memory, read_ahead=rule), profile
    if kind == "random":
        from pccx_flow.compare.families import random_dag
        from pccx_flow.schedule.dagfile import problem_from_spec

        spec = random_dag(desc["family"], desc["n"], desc["seed"], pools=desc["pools"])
        return problem_from_spec(spec), None
    if kind == "dag":
        from pccx_flow.schedule.dagfile import load_dag

        return load_dag(desc["path"]), None
    raise InputError(f"unknown instance kind {kind!r}")
