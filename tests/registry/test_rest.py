"""Schemas asked of a live registry (``--schemas http://host:port``) make the same store and decode the same
records as a file of the same REST answers. The registry is a stand-in served by ``http.server`` on
127.0.0.1 (:mod:`tests.registry.stand_in`), answering from schemas the tests define."""

from __future__ import annotations

import base64
import json
import socket

import pytest
from click.testing import CliRunner

from jobs.cli import main
from kafka_log_core.errors import SchemaError, UsageError
from kafka_log_core.registry.decoding import side_decoder
from kafka_log_core.registry.rest import BEARER_TOKEN_ENV, USER_INFO_ENV, check_url, read_registry
from kafka_log_core.registry.storage import read_schema_file
from spark_udfs import registry_topic
from tests.registry import producers
from tests.registry.stand_in import ADDRESS, CUSTOMER, registry, schema_file


def _content(store):
    return {
        subject: [
            (s.version, s.id, s.schema_type, s.schema, s.references, s.deleted)
            for s in store.versions_of(subject)
        ]
        for subject in store.subjects()
    }


def test_a_registry_url_gives_the_store_and_decoding_of_a_file_of_the_same_answers(tmp_path):
    from_file = read_schema_file(schema_file(tmp_path))
    with registry() as url:
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
    with registry() as url:
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


def _basic(user_info: str) -> str:
    """RFC 7617's header, built here with the standard library."""
    return "Basic " + base64.b64encode(user_info.encode()).decode()


def test_basic_auth_from_the_environment_is_sent_with_every_request(tmp_path, monkeypatch):
    monkeypatch.setenv(USER_INFO_ENV, "alice:s3:cret")  # the password is all after the first colon
    seen: list = []
    with registry(authorization=_basic("alice:s3:cret"), seen=seen) as url:
        store = read_registry(url)
    assert _content(store) == _content(read_schema_file(schema_file(tmp_path)))
    assert seen and set(seen) == {_basic("alice:s3:cret")}


def test_basic_auth_from_the_urls_user_info_is_decoded_and_never_shown(monkeypatch):
    monkeypatch.delenv(USER_INFO_ENV, raising=False)
    monkeypatch.delenv(BEARER_TOKEN_ENV, raising=False)
    with registry(authorization=_basic("alice:p@ss word")) as url:
        with_user = url.replace("http://", "http://alice:p%40ss%20word@")
        assert read_registry(with_user).latest("orders-value").version == 2
        with pytest.raises(SchemaError) as err:
            read_registry(url.replace("http://", "http://alice:wrong@"))
    assert str(err.value).startswith(f"{url}/subjects?deleted=true: the registry answered HTTP 401")
    assert "wrong" not in str(err.value) and "alice" not in str(err.value)


def test_a_bearer_token_from_the_environment_is_sent_as_bearer(monkeypatch):
    monkeypatch.delenv(USER_INFO_ENV, raising=False)
    monkeypatch.setenv(BEARER_TOKEN_ENV, "tok.en-1")
    with registry(authorization="Bearer tok.en-1") as url:
        assert read_registry(url).latest("orders-value").version == 2


def test_a_registry_asking_for_credentials_none_were_given_for_says_how_to_give_them(monkeypatch):
    monkeypatch.delenv(USER_INFO_ENV, raising=False)
    monkeypatch.delenv(BEARER_TOKEN_ENV, raising=False)
    with registry(authorization=_basic("alice:x")) as url:
        with pytest.raises(SchemaError, match=rf"^{url}/subjects\?deleted=true: the registry answered HTTP 401 "
                                              rf"Unauthorized \(Unauthorized\): it asks for credentials "
                                              rf"\({USER_INFO_ENV}=user:password or {BEARER_TOKEN_ENV}\)$"):  # fmt: skip
            read_registry(url)


def test_a_token_and_a_password_together_are_a_usage_error_naming_neither(monkeypatch):
    monkeypatch.setenv(BEARER_TOKEN_ENV, "tok")
    monkeypatch.setenv(USER_INFO_ENV, "alice:pw")
    with pytest.raises(UsageError, match=f"{BEARER_TOKEN_ENV}.*{USER_INFO_ENV}.*keep one") as err:
        read_registry("http://127.0.0.1:1")
    assert "pw" not in str(err.value) and "tok" not in str(err.value).replace("token", "")
    monkeypatch.delenv(USER_INFO_ENV)
    with pytest.raises(UsageError, match="the URL"):
        read_registry("http://alice:pw@127.0.0.1:1")


def test_a_url_with_a_user_and_no_password_is_a_usage_error_that_does_not_show_it():
    with pytest.raises(UsageError, match="registry URL") as err:
        check_url("http://alice@127.0.0.1:8081")
    assert "alice" not in str(err.value)
