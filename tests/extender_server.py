"""A real HTTP(S) scheduler extender for tests: ``http.server`` in a thread, answering from Python callables.

    def keep_all(args):                       # args: the decoded ExtenderArgs
        return 200, {"NodeNames": args["NodeNames"]}

    with ExtenderServer({"filter": keep_all}) as ext:
        ext.url                               # http://127.0.0.1:<port>/scheduler
        ext.requests                          # [(verb, decoded body, headers)], in arrival order

A route may return ``(status, answer)`` (the answer is sent as JSON; ``bytes`` as they are) or
sleep first to play a hanging extender. ``tls`` serves HTTPS with a server-side ``ssl.SSLContext``.
``connections`` counts the TCP connections accepted (for keep-alive checks). With
``close_after_answer`` the server drops each connection after answering without saying so, as a
server whose idle timeout expired does.
"""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Route = Callable[[Any], tuple[int, Any]]

__all__ = ["ExtenderServer", "Route"]


class ExtenderServer:
    def __init__(
        self,
        routes: Mapping[str, Route],
        *,
        prefix: str = "/scheduler",
        tls: ssl.SSLContext | None = None,
        close_after_answer: bool = False,
    ) -> None:
        self.routes = dict(routes)
        self.prefix = prefix
        self.requests: list[tuple[str, Any, Mapping[str, str]]] = []
        self.connections = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a Go extender serves
            disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                verb = self.path[len(server.prefix) + 1 :] if self.path.startswith(server.prefix + "/") else self.path
                try:
                    body: Any = json.loads(raw) if raw else None
                except ValueError:
                    body = raw
                with server._lock:
                    server.requests.append((verb, body, dict(self.headers)))
                route = server.routes.get(verb)
                status, answer = route(body) if route is not None else (404, {"Error": f"no route {verb}"})
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (a timeout test)
                    self.close_connection = True
                    return
                if close_after_answer:
                    self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.scheme = "https" if tls is not None else "http"
        # shutdown() waits for the serving loop to look at its flag, once a poll_interval: each test paid ~25 ms
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}{self.prefix}"

    def verbs(self) -> list[str]:
        with self._lock:
            return [verb for verb, _, _ in self.requests]

    def __enter__(self) -> ExtenderServer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
