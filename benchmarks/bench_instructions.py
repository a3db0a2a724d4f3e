"""CPU instructions a policy executes on the long-context step, this checkout against a git
revision: a count that does not drift with the machine's load.

On this shared machine the wall time of one policy run moves by +-20 % from run to run
(`bench_speed_against.py` pairs processes to see through it), more than most changes to
the timeline make. Valgrind's callgrind counts the instructions the interpreter executes
instead: this runs each side in a fresh interpreter under callgrind with counting off,
builds the graph and the problem, switches counting on (``callgrind_control -i on``) for
the policy alone (a `Timeline` and the policy's ``schedule``; no validation), and off
again. With PYTHONHASHSEED fixed the count repeats to the instruction, so one run per
side and policy is enough (two copies of the same code in two folders differ by ~0.02 %:
objects land at other addresses, and dicts keyed by `id` probe differently); a digest
of each side's schedule says whether the two did the same work (a ratio of different
schedules is marked). An instruction count is a proxy for time, not a time: it does not
see cache misses or mispredicted branches, so `bench_speed_against.py` still says what a
change does to seconds. This checkout runs the modules it has compiled
(`pccx_flow.compiled`; an exported revision has none): ``PCCX_FLOW_PURE_PYTHON=1`` counts
both sides' source. No NPU time is measured.

Needs valgrind (``apt install valgrind``); each run takes about 40 s at position 8191.

    python benchmarks/bench_instructions.py HEAD~1
    python benchmarks/bench_instructions.py 629e918 --profile v002-spec --policy critical-path
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_speed_against import export
from measure import RESULTS, write_and_show

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")
CHILD_TIMEOUT_S = 3600  # ~40 s a run at 8191 here


def switch_counting(state: str) -> None:
    """Turn callgrind's counting on or off in this process. `callgrind_control` exits 0
    even when it found no callgrind task (run without valgrind, or through a wrapper that
    execs the interpreter), so its answer is read: it ends with "OK." when it took."""
    done = subprocess.run(["callgrind_control", "-i", state, str(os.getpid())],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    if "OK." not in done.stdout:
        said = (done.stdout.strip() or done.stderr.strip() or "no answer").splitlines()[0]
        raise SystemExit(f"callgrind_control could not switch counting {state}: {said}")


def schedule_digest(slots: dict) -> str:
    """A digest of every node's lane, start and finish: the two sides must have made the
    same schedule for their counts to compare the same work."""
    rows = sorted((str(n), s.lane, s.start, s.finish) for n, s in slots.items())
    return hashlib.sha256(repr(rows).encode()).hexdigest()[:16]


def child(profile_name: str, position: int, policy_name: str) -> None:
    """Build the step, then run the policy with callgrind counting (the child's job)."""
    import pccx_flow
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import make_policy
    from pccx_flow.schedule.timeline import Timeline

    profile = load_profile(profile_name)
    graph = build_decode_graph("e4b", position=position, profile=profile)
    problem = problem_from_graph(graph, profile, memory=True)
    del graph
    policy = make_policy(policy_name)
    gc.collect()
    gc.disable()  # no collection counted on one side only
    switch_counting("on")
    timeline = Timeline(problem)
    policy.schedule(problem, timeline)
    switch_counting("off")
    print(json.dumps({"package": str(Path(pccx_flow.__file__).resolve().parent),
                      "placed": len(timeline.slots), "nodes": len(problem.order),
                      "schedule": schedule_digest(timeline.slots)}))  # fmt: skip


def count_in(tree: Path, profile: str, position: int, policy: str) -> dict:
    """The instructions of `policy` under `tree`'s package, in a fresh interpreter."""
    with tempfile.TemporaryDirectory(prefix="pccx-flow-callgrind-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0",
               "OPENBLAS_NUM_THREADS": "1"}  # fmt: skip
        argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                f"--callgrind-out-file={tmp}/callgrind.out", sys.executable, __file__,
                "--child", "--profile", profile, "--position", str(position),
                "--policy", policy]  # fmt: skip
        try:
            done = subprocess.run(argv, env=env, cwd=HERE, capture_output=True, text=True,
                                  timeout=CHILD_TIMEOUT_S)  # fmt: skip
        except subprocess.TimeoutExpired:
            raise SystemExit(f"{policy} under {tree} took over {CHILD_TIMEOUT_S} s") from None
    lines = done.stdout.strip().splitlines()
    found = COLLECTED.search(done.stderr)
    if done.returncode != 0 or not lines or not found or int(found.group(1)) == 0:
        # the child's own last line, not valgrind's summary (its lines start with ==pid==)
        said = [x for x in done.stderr.strip().splitlines() if not x.startswith("==")]
        last = said[-1] if said else "no instructions counted"
        raise SystemExit(f"{policy} under {tree} failed (exit {done.returncode}): {last}")
    out = json.loads(lines[-1])
    if Path(out["package"]) != (tree / "pccx_flow").resolve():
        raise SystemExit(f"the child ran {out['package']}, not {tree / 'pccx_flow'}")
    if out["placed"] != out["nodes"]:
        raise SystemExit(f"{policy} under {tree} placed {out['placed']} of {out['nodes']} nodes")
    return {"instructions": int(found.group(1)), "nodes": out["nodes"],
            "schedule": out["schedule"]}  # fmt: skip


def compare(rev: str, profile: str, position: int, policies: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="pccx-flow-rev-") as tmp:
        then_tree = Path(tmp)
        commit = export(rev, then_tree)
        out = {}
        for policy in policies:
            now = count_in(ROOT, profile, position, policy)
            then = count_in(then_tree, profile, position, policy)
            out[policy] = {
                "now": now["instructions"],
                "then": then["instructions"],
                "ratio": now["instructions"] / then["instructions"],
                "nodes": now["nodes"],
                "same_schedule": now["schedule"] == then["schedule"],
            }
            print(f"  {policy}: {out[policy]['ratio']:.3f}x", file=sys.stderr)
    return {
        "revision": rev,
        "commit": commit,
        "this_checkout": checkout_state(),
        "profile": profile,
        "position": position,
        "policies": out,
        "note": "instructions executed by the policy alone (callgrind, PYTHONHASHSEED=0); "
        "ratio = this checkout / the revision; a proxy for its time on this machine",
    }


def checkout_state() -> str:
    """This checkout's commit, and whether its package differs from it (uncommitted)."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()  # fmt: skip
    dirty = subprocess.run(["git", "status", "--porcelain", "pccx_flow"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()  # fmt: skip
    return f"{head[:12]}{' with uncommitted changes' if dirty else ''}"


def format_result(r: dict) -> str:
    lines = [
        f"E4B step at position {r['position']} on {r['profile']}: instructions of the policy "
        f"alone, this checkout ({r['this_checkout']}) against {r['revision']} "
        f"({r['commit'][:7]})",
        f"  {'policy':<15}{'now':>15}{'then':>15}{'ratio':>8}",
    ]
    for name, x in r["policies"].items():
        other = "" if x["same_schedule"] else "  (different schedules: not the same work)"
        lines.append(f"  {name:<15}{x['now']:>15,}{x['then']:>15,}{x['ratio']:7.3f}x{other}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision", nargs="?", help="git revision to compare against")
    parser.add_argument("--profile", default="v002-as-built")
    parser.add_argument("--position", type=int, default=8191)
    parser.add_argument(
        "--policy", action="append", help="policy to count (repeat; default heft, critical-path)"
    )
    parser.add_argument(
        "--out", type=Path, help="result file (default results/instructions_PROFILE.json)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    policies = args.policy or ["heft", "critical-path"]
    if args.child:
        child(args.profile, args.position, policies[0])
        return 0
    if not args.revision:
        parser.error("give the git revision to compare against, e.g. HEAD~1")
    if not (shutil.which("valgrind") and shutil.which("callgrind_control")):
        raise SystemExit("this benchmark needs valgrind: apt install valgrind")
    result = compare(args.revision, args.profile, args.position, policies)
    out = args.out or RESULTS / f"instructions_{args.profile}.json"
    write_and_show(out, result, format_result(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
