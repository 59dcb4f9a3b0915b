"""A Schema Registry stand-in served by ``http.server`` on 127.0.0.1: the documented REST endpoints
(``GET /subjects``, ``/subjects/{s}/versions``, ``/subjects/{s}/versions/{v}``, ``?deleted=true``, the
registry's 404 answers) for schemas the tests define here, and the same answers saved as a schema file."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

from tests.registry import producers

ADDRESS = json.dumps(
    {"type": "record", "name": "Address", "namespace": "shop", "fields": [{"name": "city", "type": "string"}]}
)
CUSTOMER = json.dumps(
    {"type": "record", "name": "Customer", "namespace": "shop",
     "fields": [{"name": "id", "type": "long"}, {"name": "address", "type": "shop.Address"}]}
)  # fmt: skip
#: The registry's versions as its REST API answers them (AVRO without schemaType, as the registry omits it),
#: with whether each is soft-deleted.
VERSIONS = [
    ({"subject": "orders-value", "version": 1, "id": 1, "schema": producers.ORDER_V1}, False),
    ({"subject": "orders-value", "version": 2, "id": 2, "schema": producers.ORDER_V2}, False),
    ({"subject": "orders-value", "version": 3, "id": 5, "schema": '"string"'}, True),
    ({"subject": "shop-address", "version": 1, "id": 3, "schema": ADDRESS}, False),
    ({"subject": "customers-value", "version": 1, "id": 4, "schema": CUSTOMER,
      "references": [{"name": "shop.Address", "subject": "shop-address", "version": 1}]}, False),
    ({"subject": "gone-value", "version": 1, "id": 6, "schemaType": "JSON", "schema": "{}"}, True),
]  # fmt: skip


class RegistryHandler(BaseHTTPRequestHandler):
    """GET /subjects, /subjects/{s}/versions, /subjects/{s}/versions/{v} (``?deleted=true`` to include
    soft-deleted ones), with the registry's 404 answers otherwise; with ``authorization`` set, a request
    without that ``Authorization`` header gets the registry's 401."""

    authorization: str | None = None
    seen: list[str | None]  # the Authorization header of each request

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.seen.append(self.headers.get("Authorization"))
        if self.authorization is not None and self.headers.get("Authorization") != self.authorization:
            return self._answer(401, {"error_code": 401, "message": "Unauthorized"})
        url = urlsplit(self.path)
        deleted = url.query == "deleted=true"
        visible = [answer for answer, soft in VERSIONS if deleted or not soft]
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        if parts == ["subjects"]:
            return self._answer(200, sorted({a["subject"] for a in visible}))
        if len(parts) >= 3 and parts[0] == "subjects" and parts[2] == "versions":
            found = [a for a in visible if a["subject"] == parts[1]]
            if not found:
                return self._answer(404, {"error_code": 40401, "message": f"Subject '{parts[1]}' not found."})
            if len(parts) == 3:
                return self._answer(200, [a["version"] for a in found])
            match = [a for a in found if str(a["version"]) == parts[3]]
            if len(parts) == 4 and match:
                return self._answer(200, match[0])
            return self._answer(404, {"error_code": 40402, "message": "Version not found."})
        return self._answer(404, {"error_code": 404, "message": "HTTP 404 Not Found"})

    def _answer(self, status: int, body) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:  # quiet
        pass


@contextmanager
def registry(authorization: str | None = None, seen: list | None = None) -> Iterator[str]:
    """The stand-in's URL; ``authorization``: the header it requires (e.g. ``Basic dTpw``); ``seen``
    gets the Authorization header of every request."""
    handler = type(
        "Handler", (RegistryHandler,), {"authorization": authorization, "seen": [] if seen is None else seen}
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def schema_file(tmp_path) -> str:
    """The same versions saved as a file (``GET /schemas?deleted=true`` answers carry ``deleted``)."""
    path = tmp_path / "schemas.json"
    path.write_text(json.dumps([{**answer, "deleted": soft} for answer, soft in VERSIONS]))
    return str(path)
