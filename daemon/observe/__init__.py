"""Observability above the core: metrics, the status report and what they read it through."""
