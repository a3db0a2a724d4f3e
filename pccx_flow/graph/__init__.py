"""The decode-step DAG: one Gemma 3N decode step as pccx v002 instruction nodes.

- `nodes`: the node attribute contract (what every node carries).
- `build`: `build_decode_graph(config, semantics=, position=, profile=, tile_rows=, layers=)`;
  one module per block (`blocks_pre`, `blocks_altup`, `blocks_attention`, `blocks_residual`,
  `blocks_ffn`, `blocks_ple`, `blocks_final`) and the shared mappings in `ops` / `emit`.
- `kernel_specs`: the exact math of every node kernel (the executor's contract).
- `check`: `check_graph(graph)`, the invariants of a decode graph.
- `export`: `write_graph` / `read_graph`, exact JSON and GraphML round trips.
- `select`: picking and counting nodes by layer, block, op or lane class.
"""
