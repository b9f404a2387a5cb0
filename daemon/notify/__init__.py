"""Telling someone about a task's runs: webhooks, ping URLs and a command, and a dead-man's
switch (``max_silence``). ``notifier`` decides and sends from tasks of its own; ``lanes``
gives each target its own sender and bounded queue (``outbox``); ``notice`` the record and the
JSON document; ``http_send`` and ``hook`` the two ways out; ``silence`` the switch. The
configuration is the tasks file's (``daemon.core.tasks.notify_config``)."""
