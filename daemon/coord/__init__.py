"""Cross-process coordination with ``flock``: overlap guard, slot file, run coalescing.

This is the toolbox behind ``runbroker once``, for users whose own scheduler (host cron, Ofelia,
a CI job) starts runbroker processes, often several at once. Everything here is synchronous and
short-lived-process friendly: plain ``fcntl.flock`` and ``os`` calls, no threads, no event loop.
Import from the module that holds a name:

- ``guard``: ``OverlapGuard``, a non-blocking exclusive lock, and ``read_holder``, which tells
  who holds it and since when without taking it.
- ``slot``: ``SlotFile``, one byte payload shared across processes, changed under a lock.
- ``exclusive``: ``Exclusive``, at most one run at a time with coalesced reruns instead of
  waiters (``LOCK_NAME``, ``QUEUE_NAME``: its files).
- ``outcome``: ``Outcome`` and ``ExclusiveResult``, what a call reports, and the shape of the
  ``runbroker.coord`` log lines.
- ``requests``: the queued-request count ``Exclusive`` keeps in a slot file.
- ``files``: how every one of these files is opened (0600, close-on-exec, no symlink).
"""
