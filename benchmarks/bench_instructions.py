"""CPU instructions a policy executes on the long-context step, this checkout against a git
revision: a count that does not drift with the machine's load.

On this shared machine the wall time of one policy run moves by +-20 % from run to run
(`bench_speed_against.py` pairs processes to see through it), more than most changes to
the timeline make. Valgrind's callgrind counts the instructions the interpreter executes
instead: this runs each side in a fresh interpreter under callgrind with counting off,
builds the graph and the problem, switches counting on (``callgrind_control -i on``) for
the policy alone (a `Timeline` and the policy's ``schedule``; no validation), and off
again. With PYTHONHASHSEED fixed the count repeats to the instruction, so one run per
side and policy is enough. An instruction count is a proxy for time, not a time: it does
not see cache misses or mispredicted branches, so `bench_speed_against.py` still says what
a change does to seconds. No NPU time is measured.

Needs valgrind (``apt install valgrind``); each run takes about 40 s at position 8191.

    python benchmarks/bench_instructions.py HEAD~1
    python benchmarks/bench_instructions.py 629e918 --profile v002-spec --policy critical-path
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_speed_against import export
from measure import RESULTS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


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
    pid = str(os.getpid())
    subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
    timeline = Timeline(problem)
    policy.schedule(problem, timeline)
    subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)
    print(json.dumps({"package": str(Path(pccx_flow.__file__).resolve().parent),
                      "placed": len(timeline.slots), "nodes": len(problem.order)}))  # fmt: skip


def count_in(tree: Path, profile: str, position: int, policy: str) -> dict:
    """The instructions of `policy` under `tree`'s package, in a fresh interpreter."""
    with tempfile.TemporaryDirectory(prefix="pccx-flow-callgrind-") as tmp:
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0",
               "OPENBLAS_NUM_THREADS": "1"}  # fmt: skip
        argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                f"--callgrind-out-file={tmp}/callgrind.out", sys.executable, __file__,
                "--child", "--profile", profile, "--position", str(position),
                "--policy", policy]  # fmt: skip
        done = subprocess.run(argv, env=env, cwd=HERE, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    found = COLLECTED.search(done.stderr)
    if done.returncode != 0 or not lines or not found:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"{policy} under {tree} failed (exit {done.returncode}): {last}")
    out = json.loads(lines[-1])
    if Path(out["package"]) != (tree / "pccx_flow").resolve():
        raise SystemExit(f"the child ran {out['package']}, not {tree / 'pccx_flow'}")
    if out["placed"] != out["nodes"]:
        raise SystemExit(f"{policy} under {tree} placed {out['placed']} of {out['nodes']} nodes")
    return {"instructions": int(found.group(1)), "nodes": out["nodes"]}


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
            }
            print(f"  {policy}: {out[policy]['ratio']:.3f}x", file=sys.stderr)
    return {
        "revision": rev,
        "commit": commit,
        "profile": profile,
        "position": position,
        "policies": out,
        "note": "instructions executed by the policy alone (callgrind, PYTHONHASHSEED=0); "
        "ratio = this checkout / the revision; a proxy for its time on this machine",
    }


def format_result(r: dict) -> str:
    lines = [
        f"E4B step at position {r['position']} on {r['profile']}: instructions of the policy "
        f"alone, this checkout against {r['revision']} ({r['commit'][:7]})",
        f"  {'policy':<15}{'now':>15}{'then':>15}{'ratio':>8}",
    ]
    for name, x in r["policies"].items():
        lines.append(f"  {name:<15}{x['now']:>15,}{x['then']:>15,}{x['ratio']:7.3f}x")
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
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(format_result(result))
    print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
