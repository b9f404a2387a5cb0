"""Reloading the tasks file without a restart: ``reloader`` (one all-or-nothing reload and its
record for status and health), ``waking`` (the loop that SIGHUP and the file watch wake),
``watcher`` (the tasks file's directory, through ``inotify``: the ctypes binding)."""
