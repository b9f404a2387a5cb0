"""runbroker: a job-running daemon for containers."""

__version__ = "0.1.0"
