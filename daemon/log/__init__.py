"""The daemon's log, the ground floor every part writes to: structlog set-up (``logs``), a job's
lines in the log (``output_log``), JSON lines made at C speed (``jsonlines``)."""
