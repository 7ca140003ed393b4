"""Run moto's server with every request handled one at a time.

moto checks S3 preconditions (If-None-Match / If-Match) and DynamoDB condition
expressions and then writes, with no lock in between: under load two conditional writes
of one key can both succeed, which real S3 and DynamoDB never allow. Serialising request
handling restores that atomicity; moto uses about one core either way (the GIL), so it
costs little throughput. Latency and faults come from the proxy in front, not from here.

Usage: ``python tests/servers/moto_serialized.py HOST PORT``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any


def serialized(app: Callable[..., Iterable[bytes]]) -> Callable[..., list[bytes]]:
    lock = threading.Lock()

    def handle(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with lock:
            body = app(environ, start_response)
            try:
                return list(body)
            finally:
                close = getattr(body, "close", None)
                if close is not None:
                    close()

    return handle


def main(host: str, port: int) -> None:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from moto.server import MotoRequestHandler
    from werkzeug.serving import run_simple

    app = DomainDispatcherApplication(create_backend_app)
    run_simple(host, port, serialized(app), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    # Run as a script, this folder heads sys.path and its moto.py would shadow the moto package.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    main(sys.argv[1], int(sys.argv[2]))
