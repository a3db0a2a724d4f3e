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
