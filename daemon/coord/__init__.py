"""Cross-process coordination with ``flock``: overlap guard, slot file, run coalescing.

The toolbox behind ``runbroker once``, for schedulers that start several short-lived processes
at once: synchronous, plain ``fcntl.flock`` and ``os`` calls, no threads, no event loop.
"""
