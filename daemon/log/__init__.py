"""The daemon's log, the ground floor every part writes to: structlog set-up (``logs``), structlog
imported for ``runbroker run`` without its console extras (``optional_imports``), a job's lines
in the log (``output_log``), JSON lines made at C speed (``jsonlines``)."""
