"""The L2 free-list allocator and the constant-slot cache on small hand-made cases."""

from __future__ import annotations

from pccx_flow.board.program.addresses import Addresses
from pccx_flow.board.program.alloc import L2Allocator, SlotCache, words_for


def test_words_round_up_to_128_bit_words():
    assert [words_for(n) for n in (0, 1, 16, 17, 64)] == [1, 1, 1, 2, 4]


def test_low_requests_stay_inside_the_reach_and_large_ones_stack_from_the_top():
    a = L2Allocator(total_words=160, reach_words=10)
    assert a.alloc(6, low=True) == 0
    assert a.alloc(5, low=True) is None  # 6 + 5 > reach 10, though L2 has room
    assert a.alloc(30, low=False) == 130  # large (>= 1/16 of L2): the top
    assert a.alloc(4, low=True) == 6
    assert a.alloc(20, low=False) == 110  # large again: stacked under the first
    assert a.live_words == 60 and a.peak_words == 60


def test_small_ones_fill_from_the_bottom_and_leave_the_large_a_contiguous_hole():
    """The two-ended heap: small regions never split the space the large ones need."""
    a = L2Allocator(total_words=160, reach_words=160)
    big = [a.alloc(40, low=False) for _ in range(3)]  # 120..160, 80..120, 40..80
    assert big == [120, 80, 40]
    small = [a.alloc(4, low=False) for _ in range(5)]  # first fit from 0 upward
    assert small == [0, 4, 8, 12, 16]
    a.release(80, 40)  # the middle tile dies: its whole hole is free again
    assert a.alloc(40, low=False) == 80
    for addr in small[::2]:
        a.release(addr, 4)
    assert a.alloc(4, low=False) == 0  # first fit reuses the lowest hole
    a.release(0, 4)
    for addr in (120, 80, 40, 4, 12):
        a.release(addr, 40 if addr >= 40 else 4)
    assert a.free == [[0, 160]] and a.live_words == 0 and a.peak_words == 140


def _stack_short_tile_then_whole_ones(slot_words: int) -> tuple[list[int | None], list]:
    """Whole tiles of 30 words and one of 29 (read without its row) in an L2 of three
    tiles and 2 words: A, short B under it, C under B; B and A die; D and E arrive."""
    a = L2Allocator(total_words=92, reach_words=92, slot_words=slot_words)
    placed = [a.alloc(30, low=False), a.alloc(29, low=False), a.alloc(30, low=False)]
    a.release(placed[1], 29)
    a.release(placed[0], 30)
    placed += [a.alloc(30, low=False), a.alloc(30, low=False)]
    return placed, a.free


def test_a_short_large_region_starts_where_a_whole_one_would_so_holes_stay_whole():
    """At the top of its hole the short tile shifts C down by its spare word, and the hole
    it leaves is a word short of the next whole tile although 32 words are free; a slot
    down, every boundary stays a whole tile apart and both fit. Only a region of at least
    half a slot moves: a shorter one would leave more room idle above it than it takes."""
    placed, free = _stack_short_tile_then_whole_ones(slot_words=0)
    assert placed == [62, 33, 3, 62, None] and free == [[0, 3], [33, 62]]
    placed, free = _stack_short_tile_then_whole_ones(slot_words=30)
    assert placed == [62, 32, 2, 62, 32] and free == [[0, 2]]
    a = L2Allocator(total_words=92, reach_words=92, slot_words=30)
    assert a.alloc(14, low=False) == 78  # under half a slot (a last tile of few rows): top
    assert a.alloc(15, low=False) == 48  # half a slot: a whole slot down from 78
    assert a.alloc(40, low=False) == 8  # larger than the slot: the top of its hole


def test_large_regions_stack_on_a_slot_grid_under_the_ceiling():
    """L2 of seven 16-word slots, its top 7 words a share for long-lived regions (ceiling
    105), one of them reserved there until issue position 10. Layer A's three tiles (dying
    at 5) may borrow the reserved words, layer B's (dying at 20) may not. On the grid A's
    tiles sit under the ceiling, and when they die B's last three take their slots; from
    the top of the hole instead, A's first tile used the share, so the room A leaves B is
    the reserved words short and B's sixth tile finds no place."""

    def layers(ceiling: int) -> list[int | None]:
        a = L2Allocator(total_words=112, reach_words=112, slot_words=16, ceiling=ceiling)
        assert a.alloc(3, low=False) == 0  # a small region at the bottom
        a.reserve(108, 4, due=10)
        first = [a.alloc(16, low=False, dies=5) for _ in range(3)]
        second = [a.alloc(16, low=False, dies=20) for _ in range(3)]
        for addr in first:
            a.release(addr, 16)
        return first + second + [a.alloc(16, low=False, dies=20) for _ in range(3)]

    assert layers(ceiling=105) == [89, 73, 57, 41, 25, 9, 89, 73, 57]
    assert layers(ceiling=0) == [96, 80, 64, 48, 32, 16, 92, 76, None]
    a = L2Allocator(total_words=112, reach_words=112, slot_words=16, ceiling=105)
    assert a.alloc(7, low=False) == 89  # a large region under half a slot: on the grid too
    assert a.alloc(8, low=False) == 73  # and one of half a slot, a slot down
    assert a.alloc(16, low=False) == 57


def test_slot_cache_reuses_values_and_evicts_the_least_recently_used():
    c = SlotCache(n_slots=2)
    assert c.lookup(("fmap_shape", 1, 2, 3), now=0) == (0, True, None)
    assert c.lookup(("fmap_shape", 4, 5, 6), now=1) == (1, True, None)
    assert c.lookup(("fmap_shape", 1, 2, 3), now=2) == (0, False, None)  # hit, refreshed
    slot, new, evicted = c.lookup(("weight_shape", 7, 8, 9), now=3)
    assert (slot, new, evicted) == (1, True, ("fmap_shape", 4, 5, 6))
    assert (c.memsets, c.hits, c.evictions) == (3, 1, 1)


def test_above_reach_keeps_small_regions_out_of_the_cvo_window_while_there_is_room():
    a = L2Allocator(total_words=1600, reach_words=400, small="above-reach")  # large: >= 100
    assert a.alloc(40, low=False) == 400  # small: first fit above the window
    assert a.alloc(40, low=True) == 0  # the CVO's tensors keep the window
    assert a.alloc(1000, low=False) == 600  # large: the top of the highest hole
    assert [a.alloc(45, low=False) for _ in range(3)] == [440, 485, 530]  # above the window
    assert a.alloc(30, low=False) == 40  # ... while there is room, then anywhere
    assert a.largest_hole(below=400) == 330 and a.live_below(400) == 70


def test_a_sizeable_region_beside_a_small_cvo_window_is_placed_as_a_tile():
    """A region no CVO touches and of 1/8 of the window or more (a KV tile of a few rows)
    would take much of the window from the CVO's operands, first fit from the bottom: it
    goes where a large one would, on the slot grid (else at the top of the highest hole);
    a smaller one stays at the bottom. With the window all of L2 (v002-spec) nothing
    changes."""
    a = L2Allocator(total_words=1600, reach_words=400, slot_words=200, ceiling=1500)
    assert a.alloc(50, low=False) == 1300  # 1/8 of the window: a grid place (large >= 100)
    assert a.alloc(49, low=False) == 0  # smaller: first fit from the bottom
    assert a.alloc(200, low=False) == 1100  # a whole tile: the next grid place under it
    b = L2Allocator(total_words=1600, reach_words=400)  # no grid: the top of the hole
    assert b.alloc(50, low=False) == 1550
    c = L2Allocator(total_words=1600, reach_words=1600, slot_words=200, ceiling=1500)
    assert c.alloc(50, low=False) == 0


def test_words_reserved_for_a_later_part_are_lent_only_to_regions_that_die_before_it():
    """A group (a KV tile of 40 words and the new row of 1) is placed when the row is
    produced (position 5); the tile's words are reserved until its read (position 20). A
    tile that dies at 12 may use them; one that dies at 25 may not; the claim takes them."""
    a = L2Allocator(total_words=160, reach_words=160)
    group = a.alloc(41, low=False, dies=30, later=[(0, 40, 20)])
    assert group == 119  # the top of L2: tile at 119..159, row at 159
    assert a.live_words == 1 and a.peak_words == 1  # only the row is taken
    assert a.alloc(40, low=False, dies=12) == 119  # an earlier tile borrows the reserved words
    assert a.alloc(40, low=False, dies=25) == 79  # this one outlives the due: below them
    assert a.claim(119, 40, 20) is False  # the borrower has not been freed yet
    a.release(119, 40)
    assert a.claim(119, 40, 20) is True
    assert a.reserved == [] and a.live_words == 81
    # a region without a death is never placed on reserved words
    b = L2Allocator(total_words=160, reach_words=160)
    b.alloc(41, low=False, dies=30, later=[(0, 40, 20)])
    assert b.alloc(40, low=False) == 79


def test_a_borrower_may_reserve_inside_another_reservation():
    """Group A reserves words 0..8 due at 20; group B, whose parts all die by 15, is placed on
    them and reserves its own later part there (0..4, due at 12). Claiming B's part leaves
    A's reservation in place, and A claims its words once B's parts are freed."""
    a = L2Allocator(total_words=320, reach_words=320)  # large: >= 20 words
    assert a.alloc(10, low=False, dies=30, later=[(0, 8, 20)]) == 0  # small: from the bottom
    assert a.alloc(8, low=False, dies=15, later=[(0, 4, 12)]) == 0  # B on A's reserved words
    assert a.reserved == [[0, 8, 20], [0, 4, 12]]
    assert a.claim(0, 4, 12) and a.reserved == [[0, 8, 20]]
    assert a.alloc(8, low=False, dies=25) == 10  # not on A's words: it outlives their due
    assert not a.claim(0, 8, 20)  # B's parts still hold them
    a.release(0, 4)
    a.release(4, 4)
    assert a.claim(0, 8, 20) and a.reserved == [] and a.live_words == 18


def test_placement_is_a_dry_run_and_can_count_ranges_about_to_be_freed():
    a = L2Allocator(total_words=160, reach_words=160)
    assert a.alloc(40, low=False) == 120
    assert a.alloc(40, low=False) == 80
    before = (a.free, a.live_words)
    assert a.placement(40, low=False) == 40
    assert a.placement(40, low=False, freed=[(120, 40)]) == 120  # the top, once freed
    assert a.placement(90, low=False) is None
    assert (a.free, a.live_words) == before == ([[0, 80]], 80)


class _Lowering(Addresses):
    """Just what `Addresses._take` uses: an allocator, a quarantine and a fence."""

    def __init__(self, total_words: int) -> None:
        self.l2 = L2Allocator(total_words=total_words, reach_words=total_words)
        self.quarantine: list[tuple[int, int]] = []
        self.fences: list[str] = []

    def _fence(self, reason: str) -> None:
        self.fences.append(reason)
        for addr, words in self.quarantine:
            self.l2.release(addr, words)
        self.quarantine = []


def test_a_large_region_fences_for_the_top_when_the_tile_above_waits_in_quarantine():
    """A tile freed at the top but still readable until the next fence would push the next
    tile below the one still live, and the two holes left around it would each be too
    small for a third: the lowering fences first and stacks the new tile at the top."""
    low = _Lowering(160)
    top = low._take(40, False, "t0", "n0", 0)
    mid = low._take(40, False, "t1", "n1", 1)
    assert (top, mid) == (120, 80)
    low.quarantine.append((top, 40))  # t0 is dead, an engine may still read it
    assert low._take(40, False, "t2", "n2", 2) == 120 and low.fences == ["stack a large region"]
    assert low.l2.live_words == 80
    low.quarantine.append((mid, 40))
    assert low._take(4, False, "small", "n3", 3) == 0 and low.fences == ["stack a large region"]
