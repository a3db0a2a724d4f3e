import gc
import weakref

import pytest

from pccx_flow.collector import collector_paused


class _Node:
    pass


def _cycle() -> weakref.ref:
    a, b = _Node(), _Node()
    a.other, b.other = b, a
    return weakref.ref(a)


def test_paused_inside_and_restored_after_even_on_error():
    assert gc.isenabled()
    with pytest.raises(ValueError), collector_paused():
        assert not gc.isenabled()
        raise ValueError
    assert gc.isenabled()


def test_left_off_when_it_was_off():
    gc.disable()
    try:
        with collector_paused(collect_after=True):
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_collect_after_frees_cycles_made_inside():
    with collector_paused(collect_after=True):
        ref = _cycle()
        assert ref() is not None  # nothing collects a cycle while paused
    assert ref() is None
