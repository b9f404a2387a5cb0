"""What crosses the unix socket: the wire vocabulary, the server, the thin client."""
