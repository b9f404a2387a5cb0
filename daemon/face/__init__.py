"""The command line: argument parsing, exit codes, the human-facing renderings."""
