"""The daemon's log, the ground floor every part writes to: structlog set-up (``logs``), structlog
imported without its console extras by the commands that load the core (``optional_imports``),
a job's lines in the log (``output_log``), JSON lines made at C speed (``jsonlines``)."""
