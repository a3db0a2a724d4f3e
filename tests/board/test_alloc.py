"""The L2 free-list allocator and the constant-slot cache on small hand-made cases."""

from __future__ import annotations

from pccx_flow.board.alloc import L2Allocator, SlotCache, words_for


def test_words_round_up_to_128_bit_words():
    assert [words_for(n) for n in (0, 1, 16, 17, 64)] == [1, 1, 1, 2, 4]


def test_low_requests_stay_inside_the_reach_and_high_ones_fill_from_the_top():
    a = L2Allocator(total_words=100, reach_words=10)
    assert a.alloc(6, low=True) == 0
    assert a.alloc(5, low=True) is None  # 6 + 5 > reach 10, though L2 has room
    assert a.alloc(30, low=False) == 70
    assert a.alloc(4, low=True) == 6
    assert a.live_words == 40 and a.peak_words == 40


def test_release_merges_neighbours_and_best_fit_uses_the_smallest_hole():
    a = L2Allocator(total_words=100, reach_words=100)
    x = a.alloc(10, low=False)  # 90..100
    y = a.alloc(20, low=False)  # 70..90
    z = a.alloc(5, low=False)  # 65..70
    a.release(y, 20)
    assert a.largest_hole() == 65  # 0..65 is one hole, 70..90 another
    assert a.alloc(20, low=False) == 70  # best fit: the 20-word hole, not the 65-word one
    a.release(70, 20)
    a.release(x, 10)
    a.release(z, 5)
    assert a.free == [[0, 100]] and a.live_words == 0 and a.peak_words == 35


def test_slot_cache_reuses_values_and_evicts_the_least_recently_used():
    c = SlotCache(n_slots=2)
    assert c.lookup(("fmap_shape", 1, 2, 3), now=0) == (0, True, None)
    assert c.lookup(("fmap_shape", 4, 5, 6), now=1) == (1, True, None)
    assert c.lookup(("fmap_shape", 1, 2, 3), now=2) == (0, False, None)  # hit, refreshed
    slot, new, evicted = c.lookup(("weight_shape", 7, 8, 9), now=3)
    assert (slot, new, evicted) == (1, True, ("fmap_shape", 4, 5, 6))
    assert (c.memsets, c.hits, c.evictions) == (3, 1, 1)
