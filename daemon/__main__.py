"""``python -m daemon`` is the ``runbroker`` command."""

from daemon.face.cli import entry

entry()
