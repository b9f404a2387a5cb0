"""Observability: logs, metrics, the status report."""
