"""Rung 7 of the bring-up ladder: one layer of a decode step with its golden L2 words.

The ``layer0`` prefix `pccx-flow emit --bisect` writes (`pccx_flow.board.emulator.bisect`),
lowered for the bench's profile, run batch by batch with L2 read back and compared with the
emulator's golden words after every batch (`golden_check`, `readback`), as
``dispatch --check-golden`` does.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from pccx_flow.board.device.cma import UdmabufSource
from pccx_flow.board.device.doctor_bench import (
    Bench,
    Rung,
)
from pccx_flow.board.isa import decode
from pccx_flow.errors import BoardError, PccxFlowError

# --- rung 7: one layer with golden vectors -----------------------------------------------


def layer0_stage(profile, weights, position: int):
    """The ``layer0`` prefix of the step at `position` lowered for `profile`, and per word
    its golden L2 writes (`pccx_flow.board.emulator.golden`), as `golden_check` reads them."""
    from pccx_flow.board.device.golden_check import read_golden
    from pccx_flow.board.emulator.bisect import bisect_programs, prefix_golden
    from pccx_flow.board.emulator.check import default_tokens, reference_prefix
    from pccx_flow.board.emulator.golden import write_golden
    from pccx_flow.board.isa.target import row_align_for, target_of
    from pccx_flow.board.program.lower import lower
    from pccx_flow.execute.runtime import StepContext
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import run_policy

    config = weights.config
    target = target_of(profile)
    graph = build_decode_graph(config, semantics="pccx", position=position, profile=profile,
                               row_align=row_align_for(target))  # fmt: skip
    schedule = run_policy(problem_from_graph(graph, profile, memory=True), profile,
                          "critical-path", seed=0)  # fmt: skip
    program = lower(graph, schedule, profile, config, target=target.name)
    stage = next(s for s in bisect_programs(program) if s.name == "layer0")
    tokens = default_tokens(position + 1, config.vocab)
    k_past, v_past, _ = reference_prefix(stage.program, weights, tokens)
    ctx = StepContext(config, "pccx", position, tokens[-1], "float32")
    record = prefix_golden(stage.program, weights, k_past.copy(), v_past.copy(), tokens[-1], ctx)
    with tempfile.TemporaryDirectory(prefix="pccx-flow-doctor-") as d:
        write_golden(stage.program, record, Path(d))
        golden = read_golden(Path(d))
    return stage, golden, tokens, k_past, v_past, ctx


def rung_layer(bench: Bench) -> Rung:
    """The one-layer prefix of a tiny step, L2 checked against golden words after each batch."""
    from pccx_flow.board.device.host_side import HostSide
    from pccx_flow.board.device.readback import golden_batch_check, readback_bytes
    from pccx_flow.board.device.run_step import host_buffers, run_step
    from pccx_flow.weights.checkpoint import open_checkpoint

    r = Rung(7, "one layer with golden vectors (emit --bisect layer0)", False)
    with tempfile.TemporaryDirectory(prefix="pccx-flow-doctor-") as d:
        if bench.weights is None:
            from pccx_flow.model.config import get_config
            from pccx_flow.weights.synth import write_synthetic_checkpoint

            path = write_synthetic_checkpoint(get_config("tiny"), 0, Path(d) / "ckpt",
                                              progress=False)  # fmt: skip
            what = "synthetic tiny checkpoint (seed 0)"
        else:
            path, what = bench.weights, str(bench.weights)
        weights = open_checkpoint(path)
        stage, golden, tokens, k_past, v_past, ctx = layer0_stage(
            bench.profile, weights, bench.position
        )
        program = stage.program
        r.evidence.append(
            f"layer0 prefix of the {weights.config.name} step at position {bench.position}"
            f" ({what}): {stage.instructions} words, {stage.batches} batches,"
            f" {stage.host_steps} host steps; golden L2 words of {len(golden)} instructions"
        )
        source = UdmabufSource(list(bench.buffers), bench.udmabuf_sysfs, bench.dev_root)
        buffers = host_buffers(program, source, weights, k_past, v_past, readback_bytes(golden))
        try:
            if bench.load_model is not None:
                # the fake's ``corrupt`` fault: the first GEMV with golden words, or any word
                ops = {i: decode(program.words[i]).op for i in golden}
                first = min((i for i in golden if ops[i] == "GEMV"), default=min(golden))
                bench.load_model(program, buffers, weights.config, first)
            golden_line, reader = golden_batch_check(program, bench.npu, buffers["act"], golden,
                                                     bench.timeout)  # fmt: skip

            def check(done: int, _total: int) -> None:
                line = golden_line(done)
                if line is not None:
                    raise BoardError(line)

            result = run_step(program, bench.npu, buffers, tokens[-1],
                              host=HostSide(program, buffers["act"], weights, ctx),
                              timeout=bench.timeout, progress=check)  # fmt: skip
        except PccxFlowError as exc:
            r.evidence.append(str(exc))
            r.causes = [
                "the first instruction named above computes or stores differently from the"
                " emulator's (golden) reading of the ISA: its engine, its L2 addresses, or"
                " the numbers it reads (weights and KV rows from the DDR image)",
            ]
            r.next_step = (
                "run the growing prefixes one by one (`pccx-flow emit --bisect DIR --weights"
                " CKPT`, then `pccx-flow dispatch DIR/N-NAME.prog --check-golden"
                " DIR/N-NAME.golden`) and look at the first instruction kind that fails"
            )
            return r
        finally:
            for b in buffers.values():
                b.close()
    rep = result.report
    r.evidence.append(
        f"{rep.batches} batches, {rep.host_steps} host steps, {rep.descriptors} DataMover"
        f" commands; L2 matched the golden words after every batch ({reader.batches} read-back"
        " batches)"
    )
    r.passed = True
    return r


