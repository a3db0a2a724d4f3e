"""`pccx-flow replay` and `schedule --issue` as a user runs them."""

from __future__ import annotations

import json

import pytest

from pccx_flow.cli import main as cli_main
from pccx_flow.traces.diff import read_timeline


@pytest.fixture(scope="module")
def tiny_prog(tmp_path_factory):
    out = tmp_path_factory.mktemp("prog") / "step.prog"
    assert cli_main.main(["emit", "--preset", "tiny", "--position", "9", "-o", str(out)]) == 0
    return out


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("pccx-flow: error: "), err
    return err


def test_replay_all_models_prints_labelled_estimates_and_writes_traces(tiny_prog, tmp_path,
                                                                       capsys):  # fmt: skip
    chrome, pccx, js = tmp_path / "r.json", tmp_path / "r.pccx", tmp_path / "s.json"
    argv = ["replay", str(tiny_prog), "--chrome", str(chrome), "--pccx", str(pccx),
            "--json", str(js)]  # fmt: skip
    assert cli_main.main(argv) == 0
    out = capsys.readouterr().out
    assert "model estimate, profile v002-spec" in out
    assert "list schedule (critical-path, v002-spec)" in out
    for model in ("spec", "rtl", "decoupled"):
        row = next(line for line in out.splitlines() if line.startswith(model + " "))
        assert "tok/s" not in row and len(row.split()) >= 5
        a = read_timeline(tmp_path / f"r.{model}.json")
        b = read_timeline(tmp_path / f"r.{model}.pccx")
        assert a.makespan == b.makespan > 0
        assert "model estimate, profile v002-spec" in b.source
    data = json.loads(js.read_text())
    rtl = data["replays"]["rtl"]
    assert rtl["makespan_cycles"] > data["list_schedule_cycles"]
    # every batch ends with a CVO (DONE markers), so no fence is blind to DONE under rtl
    assert rtl["counters"].get("blind_fences", 0) == 0
    assert rtl["counters"].get("host_hazards", 0) == 0  # each host step is fenced


def test_replay_one_model_on_another_profile(tiny_prog, capsys):
    argv = ["replay", str(tiny_prog), "--issue", "rtl", "--profile", "v002-as-built",
            "--no-list-schedule"]  # fmt: skip
    assert cli_main.main(argv) == 0
    out = capsys.readouterr().out
    assert "timed on v002-as-built" in out and "model estimate, profile v002-as-built" in out
    assert "\nrtl " in out and "\nspec " not in out and "list schedule" not in out


def test_replay_with_the_host_waiting_after_every_batch(tiny_prog, capsys):
    base = ["replay", str(tiny_prog), "--issue", "spec", "--no-list-schedule"]
    assert cli_main.main(base) == 0
    fences = capsys.readouterr().out
    assert cli_main.main([*base, "--host-waits", "every-batch"]) == 0
    waits = capsys.readouterr().out
    assert "polls for DONE at fences only" in fences
    assert "polls for DONE after every batch (as dispatch does)" in waits
    assert "waits after " in waits and "waits after " not in fences

    def makespan(out: str) -> int:
        row = next(line for line in out.splitlines() if line.startswith("spec "))
        return int(row.split()[1].replace(",", ""))

    assert makespan(waits) > makespan(fences)


def test_truncated_program_is_one_line(tiny_prog, tmp_path, capsys):
    bad = tmp_path / "bad.prog"
    bad.write_bytes(tiny_prog.read_bytes()[:-3])
    (tmp_path / "bad.json").write_text(tiny_prog.with_suffix(".json").read_text())
    assert cli_main.main(["replay", str(bad), "--no-list-schedule"]) == 2
    assert "truncated" in _one_error_line(capsys)


def test_corrupted_sidecar_steps_are_one_line(tiny_prog, tmp_path, capsys):
    bad = tmp_path / "bad.prog"
    bad.write_bytes(tiny_prog.read_bytes())
    side = json.loads(tiny_prog.with_suffix(".json").read_text())
    first = next(s for s in side["steps"] if s["kind"] == "batch")
    first["end"] -= 1  # the batch no longer ends on its kick marker
    (tmp_path / "bad.json").write_text(json.dumps(side))
    assert cli_main.main(["replay", str(bad), "--no-list-schedule"]) == 2
    _one_error_line(capsys)


def test_missing_program_is_one_line(tmp_path, capsys):
    assert cli_main.main(["replay", str(tmp_path / "none.prog")]) == 2
    assert "no such file" in _one_error_line(capsys)


def test_schedule_issue_prints_the_replay_of_its_step(capsys):
    argv = ["schedule", "--preset", "tiny", "--position", "9", "--issue", "rtl", "--no-progress"]
    assert cli_main.main(argv) == 0
    out = capsys.readouterr().out
    assert "replay of tiny step, position 9" in out
    assert "every time and tok/s below is a model estimate, profile v002-spec" in out
    assert "\nrtl " in out and "\nspec " not in out and "\ndecoupled " not in out


def test_a_program_of_some_layers_gets_no_token_rate(tmp_path, capsys):
    out = tmp_path / "part.prog"
    argv = ["emit", "--preset", "tiny", "--position", "3", "--layers", "0:2", "-o", str(out)]
    assert cli_main.main(argv) == 0
    capsys.readouterr()
    js = tmp_path / "part.summary.json"
    assert cli_main.main(["replay", str(out), "--json", str(js)]) == 0
    text = capsys.readouterr().out
    assert "(layers 0:2 only: not a whole token, so no tok/s)" in text
    assert "tok/s" not in text.split("list schedule")[1].split("\n")[0]
    data = json.loads(js.read_text())
    assert all(s["tokens_per_second"] is None for s in data["replays"].values())
    longest = max(s["makespan_cycles"] for s in data["replays"].values())
    assert data["list_schedule_cycles"] < longest


def test_trace_diff_of_replay_against_its_list_schedule(tiny_prog, tmp_path, capsys):
    listed, replayed = tmp_path / "list.pccx", tmp_path / "rtl.pccx"
    argv = ["schedule", "--preset", "tiny", "--position", "9", "--pccx", str(listed),
            "--no-progress"]  # fmt: skip
    assert cli_main.main(argv) == 0
    argv = ["replay", str(tiny_prog), "--issue", "rtl", "--pccx", str(replayed),
            "--no-list-schedule"]  # fmt: skip
    assert cli_main.main(argv) == 0
    capsys.readouterr()
    assert cli_main.main(["trace", "diff", str(listed), str(replayed)]) == 0
    out = capsys.readouterr().out
    assert "replay, rtl issue model (model estimate, profile v002-spec)" in out
    line = next(x for x in out.splitlines() if x.startswith("first divergence: "))
    assert line.startswith("first divergence: event 0 (pre.") and "start 0 vs " in line
    assert "host-io" in out


def test_a_program_for_a_profile_file_replays_without_its_list_schedule(tmp_path, capsys):
    prof = tmp_path / "mine.toml"
    prof.write_text('[profile]\nextends = "v002-spec"\nname = "mine"\n')
    out = tmp_path / "p.prog"
    argv = ["emit", "--preset", "tiny", "--position", "2", "--profile", str(prof), "-o", str(out)]
    assert cli_main.main(argv) == 0
    capsys.readouterr()
    assert cli_main.main(["replay", str(out), "--profile", str(prof), "--issue", "spec"]) == 0
    captured = capsys.readouterr()
    assert "no list schedule to compare" in captured.err
    assert "model estimate, profile mine" in captured.out


def test_replay_rebuilds_the_list_schedule_emit_made(tmp_path):
    """The sidecar records the seed and the layers, so a seeded policy's list schedule is
    the one `emit` lowered (the replay compares its program against it)."""
    from pccx_flow.board.program.files import read_program
    from pccx_flow.cli.replay import list_schedule_of, program_layers

    out = tmp_path / "r.prog"
    argv = ["emit", "--preset", "tiny", "--position", "4", "--policy", "random", "--seed", "7",
            "-o", str(out)]  # fmt: skip
    assert cli_main.main(argv) == 0
    prog = read_program(out)
    assert prog.meta["seed"] == 7 and prog.meta["layers"] == [0, 10]
    assert program_layers(prog) is None  # the whole step
    schedule, _, _ = list_schedule_of(prog.meta, "v002-spec")
    placed = [s.node for s in schedule.order()]
    assert [n for n in prog.nodes if n is not None and n in set(placed)]  # same graph
    assert schedule.policy == "random"
    emitted_order = list(dict.fromkeys(n for n, r in zip(prog.nodes, prog.roles,
                                                        strict=True) if r == "node"))  # fmt: skip
    npu_order = [n for n in placed if n in set(emitted_order)]
    assert npu_order == emitted_order  # the seed-7 order, not seed 0's


def test_replay_rebuilds_the_list_schedule_under_the_read_rule_emit_used(tiny_prog, monkeypatch):
    """emit records its KV read rule in the program (``meta.read_ahead``) and replay rebuilds
    the list schedule under it; a program without one predates the stream rule, when the
    fixed rules were the default."""
    from pccx_flow.board.program.files import read_program
    from pccx_flow.cli import replay
    from pccx_flow.schedule import problem as problem_module

    meta = read_program(tiny_prog).meta
    assert meta["read_ahead"] == "stream"
    asked = []
    real = problem_module.problem_from_graph

    def spy(graph, profile, **kwargs):
        asked.append(kwargs.get("read_ahead"))
        return real(graph, profile, **kwargs)

    monkeypatch.setattr(problem_module, "problem_from_graph", spy)
    old = {k: v for k, v in meta.items() if k != "read_ahead"}
    for m in (meta, {**meta, "read_ahead": "fixed"}, old):
        replay.list_schedule_of(m, m["profile"])
    assert asked == [{"rule": "stream"}, {"rule": "fixed"}, {"rule": "fixed"}]


def test_replay_names_the_nodes_the_program_issues_later_than_its_schedule(
    tmp_path, monkeypatch, capsys
):
    from tests.board.conftest import refuse_room

    node = "L01.attn.k_read.g0"  # issued long before its first reader (tiny, position 4)
    refuse_room(monkeypatch, lambda lw, n: n == node and lw.order[lw.pos[n] + 1]
                not in set(lw.g.successors(n)))  # fmt: skip
    out = tmp_path / "later.prog"
    assert cli_main.main(["emit", "--preset", "tiny", "--position", "4", "-o", str(out)]) == 0
    capsys.readouterr()
    assert cli_main.main(["replay", str(out), "--issue", "spec"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith("list schedule (critical-path"))
    assert lines[at + 1] == (
        "  the program issues 1 node later than this schedule (just before its first reader, "
        f"for a hole in L2): {node}"
    )
