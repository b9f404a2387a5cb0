"""The Postgres runner: claiming, running and recording scheduled jobs; its store; the admin
commands.

``runner`` (PgRunner) composes the parts: ``claimer`` (claims as the queue has room), ``held``
(a claimed run to its record, through ``bridge`` to the core and back), ``writer`` (records in
batches), ``loops`` (LISTEN, heartbeat, prune), ``deps`` (waiting for other jobs), ``health``
(the database's verdict and backoff), ``unusable`` (rows that cannot run). ``plan`` holds the
pure decisions, ``store`` the port and its adapters, ``admin`` the ``jobs`` and ``migrate``
commands, ``migrate`` the schema's files.
"""
