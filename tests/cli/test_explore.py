"""`pccx-flow explore` end to end (in process, no Dask): it reproduces `schedule`, keeps
going past a failing point, and refuses bad input in one line."""

from __future__ import annotations

import json

import pytest

from pccx_flow.cli.main import main

BASE = ["explore", "--preset", "tiny", "--policies", "heft", "--workers", "0", "--curve",
        "none"]  # fmt: skip


def _schedule(tmp_path, capsys, *extra: str) -> dict:
    out = tmp_path / "s.json"
    argv = ["schedule", "--preset", "tiny", "--policy", "heft", "--json", str(out), *extra]
    assert main(argv) == 0
    capsys.readouterr()
    return json.loads(out.read_text())["metrics"]


@pytest.mark.parametrize(
    ("key", "values", "schedule_args"),
    [
        ("position", (0, 63), lambda v, _: ["--position", str(v)]),
        ("gemv_lanes", (2, 8), lambda v, f: ["--profile", str(f)]),
    ],
)
def test_a_one_parameter_sweep_reproduces_schedule_point_for_point(
    tmp_path, capsys, key, values, schedule_args
):
    out = tmp_path / "e.json"
    argv = [*BASE, "--set", f"{key}={','.join(map(str, values))}", "--cache", str(tmp_path / "c"),
            "--json", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert "model estimate" in capsys.readouterr().out
    points = {p["point"][key]: p for p in json.loads(out.read_text())["points"]}
    for v in values:
        prof = tmp_path / f"p{v}.toml"
        prof.write_text(f'[profile]\nextends = "v002-spec"\nname = "x"\n[lanes]\ngemv = {v}\n')
        m = _schedule(tmp_path, capsys, *schedule_args(v, prof))
        p = points[v]
        assert p["makespan_cycles"] == m["makespan_cycles"]
        assert p["binding_bound"] == m["largest_bound"]
        assert p["bounds_cycles"] == m["bounds_cycles"]
        assert p["makespan_tok_s"] == pytest.approx(m["tokens_per_second"], rel=1e-12)
        assert p["tok_s"] == pytest.approx(m["tokens_per_second"], rel=1e-12)  # k = 0, no DDR cap
        assert p["l2_peak_bytes"] == m["l2_peak_bytes"]


def test_a_failing_point_is_recorded_and_the_sweep_goes_on(tmp_path, capsys):
    out = tmp_path / "e.csv"
    # in 4 KiB of L2 the policy's order deadlocks on memory: found only by scheduling it
    argv = [*BASE, "--set", "memory.l2_bytes=1835008,4096", "--no-cache", "--csv", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "failed: 1 of 2 points; first: memory.l2_bytes=4096: policy heft failed: memory " in text
    rows = out.read_text().splitlines()
    assert len(rows) == 3 and "memory deadlock" in rows[2] and rows[1].split(",")[1] != ""


def test_a_position_or_tile_size_the_model_cannot_take_refuses_the_sweep_in_one_line(capsys):
    err = _one_line_error(capsys, [*BASE, "--set", "position=63,64", "--no-cache"])
    assert "point 2 (position=64) refused: position 64 out of range" in err
    err = _one_line_error(capsys, [*BASE, "--set", "tile_rows=4,512", "--no-cache"])
    assert "point 1 (tile_rows=4) refused: tile_rows 4 out of range: use 8..512 for tiny" in err


def _one_line_error(capsys, argv) -> str:
    assert main(argv) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    return err


def test_malformed_sweep_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[params]\ngemv_lanes = [4, 8\n")
    assert "TOML syntax error" in _one_line_error(capsys, ["explore", str(bad)])
    bad.write_text("[params]\ngemv_lanez = [4, 8]\n")
    assert "unknown sweep parameter 'gemv_lanez'" in _one_line_error(capsys, ["explore", str(bad)])
    bad.write_text('[sweep]\nsampling = "sobol"\n[params]\ngemv_lanes = [4]\n')
    assert "give one of grid, lhs, random" in _one_line_error(capsys, ["explore", str(bad)])


def test_an_implausible_profile_is_refused_in_one_line(tmp_path, capsys):
    err = _one_line_error(capsys, [*BASE, "--set", "memory.ddr_effective_bytes_per_second=1,2e10",
                                   "--no-cache"])  # fmt: skip
    assert "point 1 (memory.ddr_effective_bytes_per_second=1) refused" in err
    assert "is not plausible" in err
    err = _one_line_error(capsys, [*BASE, "--set", "gemv_lanes=4,40", "--no-cache"])
    assert "out of range; give 1..32" in err


def test_params_lists_every_parameter(capsys):
    assert main(["explore", "--params"]) == 0
    text = capsys.readouterr().out
    for name in ("gemv_lanes", "weight_ports", "spec_k", "alpha", "sparse_down", "kv_bits"):
        assert name in text


def test_a_raw_profile_field_that_does_not_exist_is_one_line(capsys):
    err = _one_line_error(capsys, [*BASE, "--set", "sfu.latency_cycles.EXP=4,8", "--no-cache"])
    assert "has no number field 'sfu.latency_cycles.EXP'" in err


def test_replay_lowers_plain_steps_and_refuses_a_verify_step_in_one_line(tmp_path, capsys):
    out = tmp_path / "e.json"
    argv = [*BASE, "--set", "spec_k=0,1", "--replay", "rtl", "--no-cache", "--json", str(out)]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "base design replayed as a program (issue model rtl):" in text
    plain, verify = json.loads(out.read_text())["points"]
    assert plain["replay"]["model"] == "rtl" and plain["replay_tok_s"] > 0
    assert plain["replay"]["makespan_cycles"] >= plain["makespan_cycles"]
    assert verify["error"] == "--replay lowers the plain decode step only, not one with spec_k=1"


def test_a_sweep_whose_every_point_fails_exits_non_zero(capsys):
    argv = [*BASE, "--set", "memory.l2_bytes=4096", "--no-cache"]
    assert main(argv) == 1
    assert "every point of the sweep failed" in capsys.readouterr().err
