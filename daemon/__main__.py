"""``python -m daemon`` is the ``runbroker`` command."""

import sys

from daemon.cli import main

sys.exit(main())
