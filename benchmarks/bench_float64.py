"""One E4B decode step in float64: the executed graph against the reference decode.

In float32 the two differ on E4B by up to ~1e-2 (float16 KV rounding flips, float32 drift
through 35 layers; README "Numerics"), which hides whether the graph computes the same
function. With ``precision="float64"`` both keep every activation in float64 (storage as
specified: INT4 weights, float16 or float32 KV cache), so any difference beyond float64
rounding would be structural. For each semantics this runs position 0, token 2, fused on
the threaded scheduler, and the float64 reference decode, and reports the max |logit
difference|, the argmax, how many new KV elements differ, and both CPU wall times (not NPU
estimates; the float64 INT4 products use NumPy, so these runs are slower than float32).

    python benchmarks/bench_float64.py            # /work/ckpt/e4b-seed0

Writes benchmarks/results/float64.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from measure import peak_rss_mib, write_result

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

DEFAULT_WEIGHTS = "/work/ckpt/e4b-seed0"
TOKEN, POSITION = 2, 0


def run(weights: str, semantics: str) -> dict:
    import numpy as np

    from pccx_flow.execute.compare import kv_rounding
    from pccx_flow.execute.executor import execute_step
    from pccx_flow.execute.state import new_decode_state
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.reference.decode import decode_step, new_kv_cache
    from pccx_flow.weights.checkpoint import open_checkpoint

    ckpt = open_checkpoint(weights)
    cfg = ckpt.config
    graph = build_decode_graph(cfg, semantics=semantics, position=POSITION)
    state = new_decode_state(cfg, semantics, token_id=TOKEN, position=POSITION)
    t0 = time.perf_counter()
    got = execute_step(graph, ckpt, state, fuse=True, precision="float64").logits
    executor_s = time.perf_counter() - t0
    cache = new_kv_cache(cfg, semantics)
    t0 = time.perf_counter()
    want = decode_step(ckpt, TOKEN, POSITION, cache, semantics=semantics, precision="float64")
    reference_s = time.perf_counter() - t0
    k = kv_rounding(state.k_cache[:, POSITION], cache.k[:, POSITION])
    v = kv_rounding(state.v_cache[:, POSITION], cache.v[:, POSITION])
    differing = int(
        (state.k_cache[:, POSITION] != cache.k[:, POSITION]).sum()
        + (state.v_cache[:, POSITION] != cache.v[:, POSITION]).sum()
    )
    return {
        "semantics": semantics,
        "logits_dtype": str(got.dtype),
        "max_abs_diff": float(np.max(np.abs(got - want))),
        "same_argmax": bool(np.argmax(got) == np.argmax(want)),
        "kv_elements_differing": differing,
        "kv_beyond_rounding": k.beyond + v.beyond,
        "executor_s": executor_s,
        "reference_s": reference_s,
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", default=DEFAULT_WEIGHTS)
    args = ap.parse_args(argv)
    if not (Path(args.weights) / "manifest.json").is_file():
        print(f"no complete checkpoint at {args.weights} (manifest.json missing)", file=sys.stderr)
        return 2
    rows = [run(args.weights, s) for s in ("pccx", "gemma3n")]
    summary = {
        "weights": args.weights,
        "position": POSITION,
        "token": TOKEN,
        "note": "CPU wall times on this machine; not NPU estimates",
        "runs": rows,
        "peak_rss_mib": peak_rss_mib(),
    }
    for r in rows:
        print(
            f"{r['semantics']:8s} max |logit diff| {r['max_abs_diff']:.2e}, same argmax: "
            f"{r['same_argmax']}, KV elements differing {r['kv_elements_differing']}, "
            f"executor {r['executor_s']:.1f} s, reference {r['reference_s']:.1f} s"
        )
    print(f"wrote {write_result('float64', summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
