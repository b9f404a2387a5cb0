"""The socket server, above the core: accepting, one client's request, its answer lines, the
request deadlines, the socket file, and the daemon's side of ``logs``."""
