"""The `weir` command: one module per subcommand, the shared options and output in `common`."""
