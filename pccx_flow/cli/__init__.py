"""The `pccx-flow` command line: one module per subcommand, dispatched by `main`."""
