"""Schemas asked of a live registry (``--schemas http://host:port``) make the same store and decode the same
records as a file of the same REST answers. The registry is a stand-in served by ``http.server`` on
127.0.0.1, answering the documented endpoints from schemas this test defines."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

import pytest
from click.testing import CliRunner

from jobs.cli import main
from kafka_log_core.errors import SchemaError, UsageError
from kafka_log_core.registry.decoding import side_decoder
from kafka_log_core.registry.rest import check_url, read_registry
from kafka_log_core.registry.storage import read_schema_file
from spark_udfs import registry_topic
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


class _Registry(BaseHTTPRequestHandler):
    """GET /subjects, /subjects/{s}/versions, /subjects/{s}/versions/{v} (``?deleted=true`` to include
    soft-deleted ones), with the registry's 404 answers otherwise."""

    def do_GET(self):  # noqa: N802 (http.server's name)
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
def _registry() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _schema_file(tmp_path) -> str:
    """The same versions saved as a file (``GET /schemas?deleted=true`` answers carry ``deleted``)."""
    path = tmp_path / "schemas.json"
    path.write_text(json.dumps([{**answer, "deleted": soft} for answer, soft in VERSIONS]))
    return str(path)


def _content(store):
    return {
        subject: [
            (s.version, s.id, s.schema_type, s.schema, s.references, s.deleted)
            for s in store.versions_of(subject)
        ]
        for subject in store.subjects()
    }


def test_a_registry_url_gives_the_store_and_decoding_of_a_file_of_the_same_answers(tmp_path):
    from_file = read_schema_file(_schema_file(tmp_path))
    with _registry() as url:
        from_url = registry_topic.load(url + "/", "_schemas", ())
    assert _content(from_url) == _content(from_file)
    assert from_url.latest("orders-value").version == 2  # v3 is soft-deleted: readable by id, not latest
    assert from_url.by_id(5).deleted and from_url.latest("gone-value") is None
    records = {
        "orders-value": [
            producers.frame(1, producers.avro_payload(producers.ORDER_V1, {"id": 1, "name": "a", "qty": 2})),
            producers.frame(2, producers.avro_payload(producers.ORDER_V2, {"id": 2, "qty": 3, "email": None,
                                                                           "status": "paid"})),
        ],
        "customers-value": [
            producers.frame(4, producers.avro_payload(json.dumps(
                {**json.loads(CUSTOMER), "fields": [{"name": "id", "type": "long"},
                                                    {"name": "address", "type": json.loads(ADDRESS)}]}
            ), {"id": 7, "address": {"city": "Lyon"}})),
        ],
    }  # fmt: skip
    for subject, frames in records.items():
        by_url, by_file = side_decoder(from_url, subject), side_decoder(from_file, subject)
        assert by_url.arrow_type == by_file.arrow_type
        assert [by_url.decode(f) for f in frames] == [by_file.decode(f) for f in frames]
    assert side_decoder(from_url, "customers-value").decode(records["customers-value"][0])[0] == {
        "id": 7,
        "address": {"city": "Lyon"},
    }


def test_a_registry_that_answers_404_names_the_url_and_the_status():
    with _registry() as url:
        with pytest.raises(SchemaError, match=rf"^{url}/nowhere/subjects\?deleted=true: the registry answered "
                                              r"HTTP 404 Not Found \(HTTP 404 Not Found\)$"):  # fmt: skip
            read_registry(url + "/nowhere")


def test_an_unreachable_registry_is_one_error_naming_the_url():
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(SchemaError, match=rf"^{url}/subjects\?deleted=true: cannot reach the registry: "):
        read_registry(url, timeout=5)


@pytest.mark.parametrize("url", ["http://", "http://host:99999", "https://host:x/", "http://host/?q=1"])
def test_a_malformed_registry_url_is_a_usage_error(url):
    with pytest.raises(UsageError, match="registry URL"):
        check_url(url)


def test_export_refuses_a_malformed_registry_url_with_exit_2(tmp_path):
    result = CliRunner().invoke(
        main,
        ["export", "--log-dir", str(tmp_path), "--out", str(tmp_path / "x"), "--schemas", "http://h:port"],
    )
    assert result.exit_code == 2 and "expected a registry URL" in result.output, result.output
    assert "Traceback" not in result.output and not (tmp_path / "x").exists()
