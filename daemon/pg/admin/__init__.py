"""The `runbroker jobs` and `runbroker migrate` commands."""
