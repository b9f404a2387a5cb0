"""``python -m daemon`` is the ``runbroker`` command."""

from daemon.cli import entry

entry()
