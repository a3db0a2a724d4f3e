"""Scheduling policies, one per module, all behind `base.Policy`.

=================  ================================================================
``program-order``  in-order issue in program order (the naive baseline)
``random``         seeded random ready node on a random capable lane
``critical-path``  HLFET: static b-level priority, earliest start, gaps filled (default)
``heft``           HEFT: upward rank, insertion-based earliest finish
``cpop``           CPOP: critical path pinned to its fastest lane
``etf``            ETF: earliest (node, lane) start first
``dls``            DLS: highest dynamic level first
``min-min``        Min-Min: smallest earliest finish first
``lookahead``      PEFT: optimistic cost table (not HEFT's one-step lookahead)
=================  ================================================================
"""
