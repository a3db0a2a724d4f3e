"""How far a program for the RTL as built drifts from the reference decode (BF16 in L2).

An as-built program (`pccx_flow.board.isa.target`) keeps every activation and KV row in BF16;
the emulator reads its words as the RTL does and rounds every stored value to BF16. This
benchmark emulates the step against the reference decode (the oracle) and reports the max
|logit difference|, the largest |logit| (the scale the BF16 rule of
`pccx_flow.execute.compare.bf16_step_verdict` measures against), the argmax and the new KV
rows' error relative to their scale, beside the spec target's program of the same schedule:

- tiny: positions 0-15 in both semantics, heft and critical-path, float32;
- E4B (synthetic weights, ``--weights``): position 0, pccx semantics, float32, both targets.

The numbers are CPU computations of the emulator; nothing here is an NPU timing. Writes
``benchmarks/results/as_built.json``.

    python benchmarks/bench_as_built.py                  # tiny + E4B at /work/ckpt/e4b-seed0
    python benchmarks/bench_as_built.py --skip-e4b       # tiny only (a minute)
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from measure import peak_rss_mib, write_result

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

DEFAULT_WEIGHTS = "/work/ckpt/e4b-seed0"


def case(weights, position: int, semantics: str, policy: str, target: str,
         profile_name: str = "v002-as-built") -> dict:  # fmt: skip
    from pccx_flow.board.emulator.check import default_tokens, emulate_against_reference
    from pccx_flow.board.isa.target import get_target, row_align_for
    from pccx_flow.board.program.lower import lower
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import run_policy

    profile = load_profile(profile_name)
    config = weights.config
    graph = build_decode_graph(
        config, semantics=semantics, position=position, profile=profile,
        row_align=row_align_for(get_target(target)),
    )  # fmt: skip
    schedule = run_policy(problem_from_graph(graph, profile, memory=True), profile, policy)
    program = lower(graph, schedule, profile, config, target=target)
    t0 = time.perf_counter()
    r = emulate_against_reference(
        program, weights, default_tokens(position + 1, config.vocab), precision="float32"
    )
    return {
        "preset": config.name,
        "position": position,
        "semantics": semantics,
        "policy": policy,
        "profile": profile_name,
        "target": target,
        "max_abs_diff": r["max_abs_diff"],
        "logit_scale": r["logit_scale"],
        "relative": r["max_abs_diff"] / r["logit_scale"],
        "kv_error": r["kv_error"],
        "argmax_same": r["argmax_same"],
        "ok": r["ok"],
        "seconds": time.perf_counter() - t0,
    }


def tiny_cases() -> list[dict]:
    from pccx_flow.model.config import get_config
    from pccx_flow.weights.checkpoint import open_checkpoint
    from pccx_flow.weights.synth import write_synthetic_checkpoint

    out = []
    with tempfile.TemporaryDirectory() as d:
        write_synthetic_checkpoint(get_config("tiny"), seed=0, out=Path(d) / "ck", progress=False)
        weights = open_checkpoint(Path(d) / "ck")
        for semantics in ("pccx", "gemma3n"):
            for policy in ("heft", "critical-path"):
                for position in range(16):
                    for target in ("as-built", "spec"):
                        out.append(case(weights, position, semantics, policy, target))
    return out


def spread(rows: list[dict], target: str) -> dict:
    rows = [r for r in rows if r["target"] == target]
    return {
        "steps": len(rows),
        "relative_min": min(r["relative"] for r in rows),
        "relative_max": max(r["relative"] for r in rows),
        "abs_min": min(r["max_abs_diff"] for r in rows),
        "abs_max": max(r["max_abs_diff"] for r in rows),
        "kv_error_max": max(r["kv_error"] for r in rows),
        "argmax_same": sum(r["argmax_same"] for r in rows),
        "ok": sum(r["ok"] for r in rows),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights", default=DEFAULT_WEIGHTS, help="E4B checkpoint folder")
    ap.add_argument("--skip-e4b", action="store_true")
    args = ap.parse_args()
    tiny = tiny_cases()
    result = {
        "machine": platform.platform(),
        "tiny": {"cases": tiny, "as-built": spread(tiny, "as-built"), "spec": spread(tiny, "spec")},
    }
    for target in ("as-built", "spec"):
        s = result["tiny"][target]
        print(f"tiny, target {target}: {s['steps']} steps, max |dlogit| {s['abs_min']:.3g}-"
              f"{s['abs_max']:.3g} ({s['relative_min']:.2%}-{s['relative_max']:.2%} of the "
              f"largest |logit|), KV rows within {s['kv_error_max']:.2%}, argmax same on "
              f"{s['argmax_same']}, rule met on {s['ok']}")  # fmt: skip
    if not args.skip_e4b:
        if not (Path(args.weights) / "manifest.json").is_file():
            print(f"no E4B checkpoint at {args.weights}: pccx-flow weights synth --preset e4b "
                  f"--seed 0 --out {args.weights}")  # fmt: skip
            return 2
        from pccx_flow.weights.checkpoint import open_checkpoint

        e4b = open_checkpoint(args.weights)
        result["e4b"] = [
            case(e4b, 0, "pccx", "critical-path", target) for target in ("as-built", "spec")
        ]
        for r in result["e4b"]:
            print(f"E4B position 0, target {r['target']}: max |dlogit| {r['max_abs_diff']:.3g}"
                  f" ({r['relative']:.2%} of {r['logit_scale']:.3g}), KV rows within "
                  f"{r['kv_error']:.2%}, argmax {'same' if r['argmax_same'] else 'DIFFERENT'}"
                  f" ({r['seconds']:.0f} s)")  # fmt: skip
    result["peak_rss_mb"] = peak_rss_mib()
    print(f"wrote {write_result('as_built', result)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
