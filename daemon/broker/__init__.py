"""The running broker: its start-up (``daemon_main``), its composition (``app``: every part wired
and owned in one TaskGroup), its signals, shutdown and reloads. No imports here: the command
line loads ``signal_plan`` before any slow import."""
