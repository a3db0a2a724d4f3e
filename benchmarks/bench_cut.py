"""Is the policy or the bound loose? Cuts of the E4B step, solved with CP-SAT.

The whole step is far beyond what CP-SAT proves, so this takes cuts of it: one or two
consecutive layers (`build_decode_graph(..., layers=(a, b))`), within L2 as `schedule`
makes the problem (`problem_from_graph(memory=True)`), and the same problem without the
heuristic KV read-ahead edges (`SchedulingProblem.without_order_edges`): the *hardware*
problem, the one every bound of `step_bounds` is about. For each cut it records every bound
of the hardware problem, the makespans of the policies on both problems (a schedule of the
problem with the edges is a schedule of the hardware problem too), and `solve_exact` on the
hardware problem seeded with the best of them: the best makespan CP-SAT finds and the lower
bound it proves. The solver's schedule goes through `validate_schedule` like any policy's.

Read per case: *best policy / CP-SAT best* is the part of the gap that is the policy's (at
least); *CP-SAT proven bound / our largest bound* the part that is the bound's (at least);
what lies between CP-SAT's best and its proven bound is still open.

The default cases: v002-spec and v002-as-built, positions 1023 and 8191, cuts of one and
two layers from layer 17. Layer 17 is dense (E4B's sparse FFN gate is on layers 0-9), local
(global layers are 4, 9, 14, ...; under the pccx semantics both attend the whole context
and differ only in RoPE θ) and owns its KV cache (layers 20-34 reuse layer 18's or 19's);
the two-layer cut is 17-18 (both local). Makespans and bounds are model estimates on the named
profile, never measured on a board; solver wall time is this machine's, with whatever else
runs on it (the load average before and after each case is recorded).

    python benchmarks/bench_cut.py                            # the 8 default cases
    python benchmarks/bench_cut.py --positions 255 --keep     # add rows to the existing file
    python benchmarks/bench_cut.py --seconds 60               # CP-SAT time per case
    python benchmarks/bench_cut.py --drop-blocks ffn --keep   # part of a layer
    python benchmarks/bench_cut.py --bound-search --profiles v002-spec --positions 1023 \
        --widths 1 --seconds 180                              # a second, bound-searching solve

Writes benchmarks/results/cut.json (after each case, so a long run keeps its rows).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from measure import RESULTS, write_result  # noqa: E402

from pccx_flow.compare.exact import ExactPolicy, solve_exact  # noqa: E402
from pccx_flow.errors import PccxFlowError  # noqa: E402
from pccx_flow.graph.build import build_decode_graph  # noqa: E402
from pccx_flow.hardware.profile import load_profile  # noqa: E402
from pccx_flow.schedule.chains import POOL_CHAIN_HOPS, chain_bounds  # noqa: E402
from pccx_flow.schedule.metrics import step_bounds  # noqa: E402
from pccx_flow.schedule.problem import SchedulingProblem, problem_from_graph  # noqa: E402
from pccx_flow.schedule.registry import make_policy, run_on_problem  # noqa: E402
from pccx_flow.schedule.validate import validate_schedule  # noqa: E402

POLICIES = ["heft", "critical-path", "lookahead", "heft+improve", "critical-path+improve"]
# which problem a policy ran on: as `schedule` makes it, or the hardware's (no order edges)
PROBLEMS = ("l2", "hardware")
# CP-SAT: the full linear relaxation found shorter schedules of the one-layer cut in 30-40 s
# than the default; `energy` gives it the pool bound, which its relaxation does not find
SOLVER = {"parameters": {"linearization_level": 2}, "energy": True}
# a second solve that searches for a bound: objective shaving (proving makespan <= X
# infeasible) beside the full relaxation; it proved 324,374 cycles on attention alone,
# where the first settings proved 276,963
BOUND_SOLVER = {"parameters": {"subsolvers": ["objective_shaving", "max_lp"]}, "energy": True}


def inputs_behind_one_node(problem: SchedulingProblem) -> SchedulingProblem:
    """`problem` with one 0-cycle node ahead of the cut's inputs (its ``state_read`` nodes).

    In a cut, the layer's inputs (the AltUp streams, the PLE input) have no inputs of their
    own and hold L2 bytes, so `capacity_chain` groups them with the layer's KV reads, and
    the PLE input's reader at the end of the layer delays every start that group forces
    past the layer: the bound stays at pool_chain. In the whole step those inputs do not
    exist. Behind one node they are no longer sources. Every schedule of the cut is one of
    this problem with the new node at time 0 (it takes no time and holds nothing), so a
    bound of this problem is a bound of the cut.
    """
    graph = problem.graph.copy()
    head = "cut.inputs"
    inputs = [n for n in problem.order
              if not problem.preds[n] and graph.nodes[n].get("kernel") == "state_read"]  # fmt: skip
    graph.add_node(head, lane_class="ctrl", block="cut")
    graph.add_edges_from((head, n) for n in inputs)
    ctrl = next(ln.name for ln in problem.lanes if ln.lane_class == "ctrl")
    holds: dict = {}
    for h in problem.holds:
        holds.setdefault(h.node, []).append((h.readers, dict(h.row)))
    return SchedulingProblem(
        graph, problem.lanes, {**problem.costs, head: {ctrl: 0}},
        resources=problem.resources, pools=problem.pools, capacities=problem.capacities,
        holds=holds,
    )  # fmt: skip


def _row_problems(r: dict):
    profile = load_profile(r["profile"])
    graph = build_decode_graph("e4b", position=r["position"], profile=profile,
                               layers=tuple(r["layers"]))  # fmt: skip
    drop = set(r.get("dropped_blocks", ()))
    if drop:
        graph = graph.subgraph([n for n, d in graph.nodes(data=True)
                                if d.get("block") not in drop]).copy()  # fmt: skip
    l2 = problem_from_graph(graph, profile, memory=True)
    return profile, l2, l2.without_order_edges()


def cut_input_bounds(r: dict) -> dict:
    """`inputs_behind_one_node`'s chain bounds for a row of results/cut.json."""
    _, _, hardware = _row_problems(r)
    return chain_bounds(inputs_behind_one_node(hardware), POOL_CHAIN_HOPS, capacity=True)


def refresh_bounds(r: dict) -> None:
    """A row's bounds (and what is measured against the largest) from the current code; its
    policy and CP-SAT results stay those of the run that wrote it."""
    profile, _, hardware = _row_problems(r)
    sb = step_bounds(hardware, profile)
    r["bounds"], r["largest_bound"] = sb["bounds_cycles"], sb["largest_bound"]
    r["bounds_inputs_behind_one_node"] = cut_input_bounds(r)
    largest = r["bounds"][r["largest_bound"]]
    r["policy_over_largest_bound"] = r["best_policy_cycles"] / largest - 1
    for res in r["policies"].values():
        if "makespan_cycles" in res:
            res["over_largest_bound"] = res["makespan_cycles"] / largest - 1
    lb = r["exact"].get("lower_bound")
    if lb is not None:
        r["exact_bound_over_largest_bound"] = lb / largest - 1


def bound_search(r: dict, seconds: float, workers: int) -> dict:
    """`BOUND_SOLVER` on a row's hardware problem, seeded with its best policy schedule."""
    profile, l2, hardware = _row_problems(r)
    name, which = r["best_policy"].split("/")
    s = run_on_problem(make_policy(name), l2 if which == "l2" else hardware, label=name,
                       profile=profile.name)  # fmt: skip
    hint = {n: (sl.lane, sl.start) for n, sl in s.slots.items()}
    res = solve_exact(hardware, hint=hint, upper=s.makespan, seconds=seconds, workers=workers,
                      **BOUND_SOLVER)  # fmt: skip
    placement = res.pop("placement", None)
    if placement is not None:
        checked = run_on_problem(ExactPolicy(placement), hardware, label="exact",
                                 profile=profile.name)  # fmt: skip
        res["validated"] = True
        res["makespan"] = checked.makespan
    res["seconds_limit"] = seconds
    res["solver"] = BOUND_SOLVER
    return res


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def bench_case(profile_name: str, position: int, layers: tuple[int, int], seconds: float,
               workers: int, policies: list[str], drop: tuple[str, ...] = ()) -> dict:  # fmt: skip
    profile = load_profile(profile_name)
    row: dict = {"profile": profile.name, "position": position, "layers": list(layers),
                 "dropped_blocks": sorted(drop), "load_before": _load()}  # fmt: skip
    graph = build_decode_graph("e4b", position=position, profile=profile, layers=layers)
    if drop:  # part of a layer: the nodes of the other blocks, their inputs from outside free
        keep = [n for n, d in graph.nodes(data=True) if d.get("block") not in drop]
        graph = graph.subgraph(keep).copy()
    l2 = problem_from_graph(graph, profile, memory=True)
    hardware = l2.without_order_edges()
    problems = {"l2": l2, "hardware": hardware}
    row["nodes"] = len(graph)
    row["edges"] = graph.number_of_edges()
    row["order_only_edges"] = len(l2.order_edges)
    row["holds"] = len(hardware.holds)
    sb = step_bounds(hardware, profile)
    row["bounds"] = sb["bounds_cycles"]
    row["largest_bound"] = sb["largest_bound"]
    row["bounds_inputs_behind_one_node"] = chain_bounds(
        inputs_behind_one_node(hardware), POOL_CHAIN_HOPS, capacity=True)  # fmt: skip
    largest = sb["bounds_cycles"][sb["largest_bound"]]
    tag = f"{profile.name} p={position} L{layers[0]}-{layers[1] - 1}"
    tag += f" without {','.join(sorted(drop))}" if drop else ""
    print(f"{tag}: {len(graph)} nodes, largest bound {sb['largest_bound']} {largest:,}",
          file=sys.stderr)  # fmt: skip
    row["policies"] = {}
    best = None
    for name in policies:
        for which in PROBLEMS:
            key = f"{name}/{which}"
            t = time.perf_counter()
            try:
                s = run_on_problem(make_policy(name), problems[which], label=name,
                                   profile=profile.name)  # fmt: skip
                validate_schedule(s, hardware)  # valid on the hardware problem too
            except PccxFlowError as exc:
                row["policies"][key] = {"error": str(exc)[:300],
                                        "seconds": time.perf_counter() - t}  # fmt: skip
                print(f"  {key}: {exc}"[:200], file=sys.stderr)
                continue
            row["policies"][key] = {
                "makespan_cycles": s.makespan,
                "over_largest_bound": s.makespan / largest - 1,
                "seconds": time.perf_counter() - t,
            }
            print(f"  {key}: {s.makespan:,} ({s.makespan / largest - 1:+.2%})", file=sys.stderr)
            if best is None or s.makespan < best[1].makespan:
                best = (key, s)
    if best is None:
        raise SystemExit(f"{tag}: no policy scheduled the cut")
    row["best_policy"] = best[0]
    row["best_policy_cycles"] = best[1].makespan
    hint = {n: (sl.lane, sl.start) for n, sl in best[1].slots.items()}
    res = solve_exact(hardware, hint=hint, upper=best[1].makespan, seconds=seconds,
                      workers=workers, **SOLVER)  # fmt: skip
    placement = res.pop("placement", None)
    if placement is not None:  # the solver's schedule must pass the validator too
        checked = run_on_problem(ExactPolicy(placement), hardware, label="exact",
                                 profile=profile.name)  # fmt: skip
        validate_schedule(checked, hardware)
        res["validated"] = True
        res["makespan"] = checked.makespan
    res["seconds_limit"] = seconds
    row["exact"] = res
    row["load_after"] = _load()
    lb = res.get("lower_bound")
    print(f"  exact: {res['status']} {res.get('makespan')} lb {lb} in {res['seconds']:.0f} s "
          f"(load {row['load_before']} -> {row['load_after']})", file=sys.stderr)  # fmt: skip
    if res.get("makespan") is not None:
        row["policy_over_exact_best"] = best[1].makespan / res["makespan"] - 1
    if lb is not None:
        row["exact_bound_over_largest_bound"] = lb / largest - 1
        row["policy_over_exact_bound"] = best[1].makespan / lb - 1
    row["policy_over_largest_bound"] = best[1].makespan / largest - 1
    return row


def _case(r: dict) -> tuple:
    return (r["profile"], r.get("dropped_blocks", []), r["position"], r["layers"])


def format_table(rows: list[dict]) -> str:
    lines = [f"{'profile':<14}{'pos':>5} {'layers':>6} {'nodes':>6}  {'largest bound':<28}"
             f"{'best policy':>26}{'CP-SAT':>22}{'CP-SAT bound':>14}"]  # fmt: skip
    for r in rows:
        ex = r["exact"]
        lb = ex.get("lower_bound")
        bound = f"{r['largest_bound']} {r['bounds'][r['largest_bound']]:,}"
        lines.append(
            f"{r['profile']:<14}{r['position']:>5} {r['layers'][0]:>3}-{r['layers'][1] - 1:<2}"
            f"{r['nodes']:>6}  {bound:<28}"
            f"{r['best_policy_cycles']:>14,} {r['policy_over_largest_bound']:+.2%}"
            f"{ex['status']:>10} {ex.get('makespan') or 0:>11,}"
            f"{(lb or 0):>14,}"
        )  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="+", default=["v002-spec", "v002-as-built"])
    parser.add_argument("--positions", type=int, nargs="+", default=[1023, 8191])
    parser.add_argument("--layer", type=int, default=17, help="first layer of each cut")
    parser.add_argument("--widths", type=int, nargs="+", default=[1, 2],
                        help="layers per cut")  # fmt: skip
    parser.add_argument("--drop-blocks", nargs="+", default=[],
                        help="leave these blocks (ffn, attn, ...) out of each cut")  # fmt: skip
    parser.add_argument("--seconds", type=float, default=120.0, help="CP-SAT time per case")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--policies", nargs="+", default=POLICIES)
    parser.add_argument("--bounds-only", action="store_true",
                        help="only recompute the rows' bounds (after they change)")  # fmt: skip
    parser.add_argument("--bound-search", action="store_true",
                        help="only run BOUND_SOLVER on the selected rows")  # fmt: skip
    parser.add_argument("--keep", action="store_true",
                        help="keep the other cases' rows in results/cut.json")  # fmt: skip
    args = parser.parse_args(argv)
    out = RESULTS / "cut.json"
    rows: list[dict] = []
    if args.keep and out.exists():
        rows = json.loads(out.read_text())["rows"]
    if args.bounds_only:
        data = json.loads(out.read_text())
        for r in data["rows"]:
            refresh_bounds(r)
        write_result("cut", data)
        return 0
    if args.bound_search:
        data = json.loads(out.read_text())
        drop = sorted(args.drop_blocks)
        for r in data["rows"]:
            if (r["profile"] in args.profiles and r["position"] in args.positions
                    and r["layers"] == [args.layer, args.layer + r["layers"][1] - r["layers"][0]]
                    and r["layers"][1] - r["layers"][0] in args.widths
                    and r.get("dropped_blocks", []) == drop):  # fmt: skip
                before = _load()
                r["bound_search"] = res = bound_search(r, args.seconds, args.workers)
                res["load_before"], res["load_after"] = before, _load()
                print(f"{_case(r)}: {res['status']} {res.get('makespan')} lb "
                      f"{res['lower_bound']}", file=sys.stderr)  # fmt: skip
                write_result("cut", data)
        return 0
    load_start = _load()
    for p in args.profiles:
        for pos in args.positions:
            for w in args.widths:
                layers = (args.layer, args.layer + w)
                drop = tuple(sorted(args.drop_blocks))
                case = (p, list(drop), pos, list(layers))
                rows = [r for r in rows if _case(r) != case]
                rows.append(bench_case(p, pos, layers, args.seconds, args.workers,
                                       args.policies, drop))  # fmt: skip
                rows.sort(key=lambda r: (r["profile"] != "v002-spec", _case(r)))
                write_result("cut", {
                    "benchmark": "cut",
                    "note": "makespans and bounds are model estimates on the named profile, "
                    "never measured on a board; 'hardware' is the problem within L2 without "
                    "the order-only KV read-ahead edges, the problem the bounds are about; "
                    "exact is CP-SAT on it, seeded with the best policy schedule, and its "
                    "lower_bound is what CP-SAT proved",
                    "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
                    "seconds_per_case": args.seconds,
                    "workers": args.workers,
                    "solver": SOLVER,
                    "load_at_start": load_start,
                    "rows": rows,
                })  # fmt: skip
    print(format_table(rows))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
