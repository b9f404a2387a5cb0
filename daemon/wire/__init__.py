"""What crosses the unix socket, below the core: the wire vocabulary and the thin client."""
