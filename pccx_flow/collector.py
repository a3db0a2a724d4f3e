"""Pausing Python's cyclic garbage collector while a decode step is built and scheduled.

Building, scheduling and measuring one E4B step allocates ~10^6 small objects (node and
tensor dicts, slots, bit sets) that all stay alive until the step is done. The cyclic
collector, triggered by allocation counts, rescans them again and again and frees nothing:
at position 8191 that was ~0.8 s of a ~5 s `schedule` run, over half of a graph build.
Reference counting still frees everything that is not in a cycle while it is paused.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused(*, collect_after: bool = False) -> Iterator[None]:
    """Run the body with the cyclic collector off, then restore it (and, with
    `collect_after`, collect once: a long-lived process that goes on to other work).

    That collection looks at the young generations only: everything the body allocated is
    young (nothing was collected, so nothing was promoted), and older objects, such as the
    graphs an explore worker keeps, are not rescanned for every point."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
            if collect_after:
                gc.collect(1)
