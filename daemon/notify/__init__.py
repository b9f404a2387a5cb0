"""Telling someone about a task's runs: webhooks, ping URLs and a command, and a dead-man's
switch (``max_silence``). ``notifier`` decides and sends from tasks of its own; ``lanes``
gives each target its own sender and bounded queue (``outbox``); ``notice`` the record and the
JSON document; ``http_send`` and ``hook`` the two ways out; ``silence`` the switch. A task's
targets are values of the core (``daemon.core.tasks.notify_targets``), read from the tasks
file by ``daemon.taskfile.notify_config``."""
