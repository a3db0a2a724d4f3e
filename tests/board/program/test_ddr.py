"""The DDR image must fit the profile's DDR: a 1 KiB DDR is one line in schedule and emit."""

from __future__ import annotations

import pytest

from pccx_flow.cli.main import main

SMALL_DDR = (
    '[profile]\nname = "small-ddr"\nextends = "v002-spec"\n\n[memory]\n'
    'ddr_bytes = { value = 1024, tag = "assumed", note = "a deliberately small DDR" }\n'
)


@pytest.mark.parametrize("command", ["schedule", "emit"])
def test_an_image_larger_than_the_ddr_is_one_line(command, tmp_path, capsys):
    profile = tmp_path / "small.toml"
    profile.write_text(SMALL_DDR)
    out = tmp_path / "s.prog"
    argv = [command, "--preset", "tiny", "--profile", str(profile)]
    assert main(argv + (["-o", str(out)] if command == "emit" else [])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "does not fit profile small-ddr's memory.ddr_bytes = 1,024 B" in err
    assert not out.exists()


def test_the_e4b_image_fits_the_kv260(capsys):
    from pccx_flow.board.program.ddr import check_ddr_capacity
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.model.config import get_config

    for name in ("v002-spec", "v002-as-built"):
        image = check_ddr_capacity(get_config("e4b"), load_profile(name), "float32")
        assert image["total_bytes"] <= 4 * 2**30


def test_a_cache_row_joins_only_once_every_head_of_both_kinds_is_there():
    import numpy as np

    from pccx_flow.board.program.ddr import join_kv_heads

    k = {0: np.array([1.0, 2.0]), 1: np.array([3.0, 4.0])}
    v = {1: np.array([7.0, 8.0]), 0: np.array([5.0, 6.0])}  # written out of head order
    k_row, v_row = join_kv_heads({"k": k, "v": v}, heads=2)
    assert k_row.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert v_row.tolist() == [5.0, 6.0, 7.0, 8.0]
    # a program cut short between two heads: no row rather than a row one head short
    assert join_kv_heads({"k": k, "v": {0: v[0]}}, heads=2) is None
    assert join_kv_heads({"k": {0: k[0]}, "v": {0: v[0]}}, heads=2) is None
    assert join_kv_heads({"k": k}, heads=2) is None
