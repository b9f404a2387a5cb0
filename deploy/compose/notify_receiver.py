"""An example notification receiver for the compose stack: it prints every webhook and ping it
gets (its path and body) as one JSON line, and answers 204. See what a task's notifications
send with ``docker compose logs -f notify-receiver``. Standard library only; ``--check PORT`` is
its health check."""

import json
import socket
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_BODY_BYTES = 1 << 20


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY_BYTES)
        body = self.rfile.read(length).decode("utf-8", "replace")
        try:
            shown = json.loads(body)
        except ValueError:
            shown = body
        print(json.dumps({"path": self.path, "body": shown}), flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


if __name__ == "__main__":
    port = int(sys.argv[-1]) if len(sys.argv) > 1 else 8080
    if sys.argv[1:2] == ["--check"]:  # the health check: is the receiver listening?
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        sys.exit(0)
    ThreadingHTTPServer(("0.0.0.0", port), Receiver).serve_forever()
