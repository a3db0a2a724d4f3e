"""`pccx-flow schedule` end to end on the tiny preset (the E4B default is exercised elsewhere)."""

from __future__ import annotations

import json

import pytest

from pccx_flow.cli.main import main
from pccx_flow.schedule.registry import BUILTIN_POLICIES

TINY = ["schedule", "--preset", "tiny"]


def test_summary_on_tiny(capsys):
    assert main([*TINY, "--policy", "heft", "--profile", "v002-as-built"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == "pccx-flow schedule: policy heft, profile v002-as-built"
    assert "preset tiny, semantics pccx, position 63, layers 0:10" in out
    assert "model estimate, profile v002-as-built" in out
    assert "<- largest" in out and "LAuReL" in out and "PLE slack" in out
    assert max(len(line) for line in lines) <= 80


def test_profile_from_a_user_file(tmp_path, capsys):
    toml = tmp_path / "board.toml"
    toml.write_text(
        '[profile]\nname = "my-board"\nextends = "v002-spec"\n[pools]\nweight_port = 1\n'
    )
    assert main([*TINY, "--profile", str(toml)]) == 0
    out = capsys.readouterr().out
    assert "profile my-board" in out and "model estimate, profile my-board" in out
    assert "weight_port: all 1 busy" in out


def test_list_has_one_line_per_policy(capsys):
    assert main(["schedule", "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in out]
    assert names[: len(BUILTIN_POLICIES)] == list(BUILTIN_POLICIES)
    assert sum("(default)" in line for line in out) == 1
    assert out[names.index("critical-path")].endswith("(default)")
    assert max(len(line) for line in out) <= 80


def test_json_and_trace_outputs(tmp_path, capsys):
    out_json, out_trace = tmp_path / "s.json", tmp_path / "t.json"
    argv = [*TINY, "--layers", "0:5", "--json", str(out_json), "--trace", str(out_trace)]
    assert main(argv) == 0
    data = json.loads(out_json.read_text())
    assert data["policy"] == "critical-path" and data["profile"] == "v002-spec"
    assert data["context"]["layers"] == "0:5" and data["context"]["partial"]
    assert data["metrics"]["tokens_per_second"] is None
    assert data["metrics"]["makespan_cycles"] == data["makespan_cycles"]
    assert data["metrics"]["estimate"] == "model estimate, profile v002-spec"
    assert len(data["slots"]) == data["metrics"]["nodes"]
    assert {s["node"].split(".")[0] for s in data["slots"]} >= {"pre", "L00", "L04"}
    assert not any(s["node"].startswith("L05") for s in data["slots"])
    trace = json.loads(out_trace.read_text())
    assert sum(e["ph"] == "X" for e in trace["traceEvents"]) == len(data["slots"])
    assert "wrote" in capsys.readouterr().err


def test_the_collector_stays_off_until_the_steps_objects_are_freed(tmp_path, monkeypatch):
    """Back on among the step's live objects, the collector's first pass scanned them all
    (~0.3 s at position 8191): it is off while the outputs are written, on again after."""
    import gc

    from pccx_flow.schedule.model import Schedule

    seen = []
    to_json = Schedule.to_json

    def recorded(self, *args, **kwargs):
        seen.append(gc.isenabled())
        return to_json(self, *args, **kwargs)

    monkeypatch.setattr(Schedule, "to_json", recorded)
    assert gc.isenabled()
    assert main([*TINY, "--layers", "0:2", "--json", str(tmp_path / "s.json")]) == 0
    assert seen == [False] and gc.isenabled()


def test_a_layer_range_is_not_shown_as_a_token_rate(capsys):
    assert main([*TINY, "--layers", "2:4"]) == 0
    out = capsys.readouterr().out
    assert "for layers 2:4" in out and "part of a step only: no tok/s" in out
    assert "/token" not in out


def test_gantt_is_written(tmp_path):
    out = tmp_path / "g.svg"
    assert main([*TINY, "--gantt", str(out)]) == 0
    assert out.read_text().lstrip().startswith(("<?xml", "<svg"))


def test_random_policy_uses_the_seed(tmp_path):
    spans = []
    for seed in (1, 1, 2):
        out = tmp_path / f"r{seed}.json"
        assert main([*TINY, "--policy", "random", "--seed", str(seed), "--json", str(out)]) == 0
        spans.append(json.loads(out.read_text())["slots"])
    assert spans[0] == spans[1]
    assert spans[0] != spans[2]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--policy", "fastest"], "unknown policy 'fastest'; choose one of: program-order"),
        (["--profile", "v003"], "unknown hardware profile 'v003'"),
        (["--layers", "4:2"], "--layers '4:2': need 0 <= A < B <= 10"),
        (["--layers", "a:b"], "--layers 'a:b': write A:B with integers"),
        (["--position", "64"], "position 64 out of range"),
        (["--semantics", "hf"], "unknown semantics 'hf'"),
        (["--policy", "no_such_module_x:Thing"], "cannot import policy module"),
        (["--json", "/nonexistent-dir/x.json"], "folder /nonexistent-dir does not exist"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, message):
    assert main([*TINY, *argv]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("pccx-flow: error: ")
    assert message in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert "Traceback" not in captured.err


def test_bad_preset_and_tile_rows(capsys):
    assert main(["schedule", "--preset", "e5b"]) == 2
    assert "unknown preset 'e5b'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main([*TINY, "--tile-rows", "0"])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    assert "--tile-rows" in err and "0 is out of range" in err


def test_help_shows_examples(capsys):
    with pytest.raises(SystemExit):
        main(["schedule", "--help"])
    out = capsys.readouterr().out
    assert "examples:" in out and "pccx-flow schedule --list" in out


def test_memory_flag_reports_l2_and_writes_it_to_json(tmp_path, capsys):
    out_json = tmp_path / "s.json"
    argv = [*TINY, "--profile", "v002-as-built", "--memory", "--json", str(out_json)]
    assert main([*argv, "--gantt", str(tmp_path / "g.svg")]) == 0
    out = capsys.readouterr().out
    assert "l2        peak" in out and "l2_reach  peak" in out and "waited for memory" in out
    assert max(len(line) for line in out.splitlines()) <= 80
    metrics = json.loads(out_json.read_text())["metrics"]
    assert 0 < metrics["l2_peak_bytes"] <= metrics["l2_bytes"] == 1_835_008
    assert 0 < metrics["l2_reach_peak_bytes"] <= metrics["l2_reach_bytes"] == 262_144
    assert "residency:l2" in metrics["bounds_cycles"]
    assert "L2" in (tmp_path / "g.svg").read_text()  # the Gantt chart's L2 row (KiB axis)
