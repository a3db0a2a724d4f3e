import pytest

from pccx_flow.graph.nodes import BLOCKS, LANE_CLASSES, OPS
from pccx_flow.render import style


def test_every_lane_class_block_and_op_has_its_own_look():
    assert set(style.LANE_COLOURS) == set(LANE_CLASSES)
    assert len(set(style.LANE_COLOURS.values())) == len(LANE_CLASSES)
    assert set(style.BLOCK_COLOURS) == set(BLOCKS)
    assert set(style.BLOCK_TITLES) == set(BLOCKS)
    assert set(style.OP_SHAPES) == set(OPS)
    assert len(set(style.OP_SHAPES.values())) == len(OPS)
    assert set(BLOCKS) >= style.OFF_PATH_BLOCKS


def test_unknown_names_fall_back_to_the_mixed_look():
    assert style.lane_colour(None) == style.MIXED_COLOUR
    assert style.lane_colour("warp-drive") == style.MIXED_COLOUR
    assert style.block_colour("nope") == style.MIXED_COLOUR
    assert style.op_shape(None) == style.GROUP_SHAPE
    assert style.block_title("ffn") == "FFN"


def test_text_colour_contrasts_with_the_fill():
    assert style.text_colour("#ffffff") == "#000000"
    assert style.text_colour("#000000") == "#ffffff"
    assert style.text_colour(style.LANE_COLOURS["gemv"]) == "#ffffff"  # dark blue
    assert style.text_colour(style.LANE_COLOURS["ctrl"]) == "#000000"  # light grey


def _closest_pair(colours: dict[str, str], names) -> tuple[float, str, str, str]:
    """Smallest CIEDE2000 distance between two of `names`, over normal and CVD vision."""
    import itertools

    from coloraide import Color

    worst = (1e9, "", "", "")
    for vision in (None, "protan", "deutan", "tritan"):
        seen = {n: Color(colours[n]) for n in names}
        if vision:
            seen = {n: c.filter(vision) for n, c in seen.items()}
        for a, b in itertools.combinations(names, 2):
            worst = min(worst, (seen[a].delta_e(seen[b], method="2000"), a, b, str(vision)))
    return worst


def test_palette_stays_apart_under_colour_vision_deficiencies():
    pytest.importorskip("coloraide", reason="the test extra (coloraide) is not installed")
    assert set(style.LAYER_BLOCKS) <= set(BLOCKS)
    # the blocks of one layer stand side by side in a Gantt row: far apart for every reader
    d, a, b, vision = _closest_pair(style.BLOCK_COLOURS, style.LAYER_BLOCKS)
    assert d >= 15, (a, b, vision)
    d, a, b, vision = _closest_pair(style.BLOCK_COLOURS, BLOCKS)
    assert d >= 7.5, (a, b, vision)
    d, a, b, vision = _closest_pair(style.LANE_COLOURS, LANE_CLASSES)
    assert d >= 7.5, (a, b, vision)
    # the pairs a newcomer could not tell apart before
    for a, b in (("altup_pred", "altup_corr"), ("const", "residual")):
        assert _closest_pair(style.BLOCK_COLOURS, (a, b))[0] >= 15
