"""The ``schemas`` option of the ``kafka-log`` source: typed values from the registry's ``_schemas``
topic in the log dir, older records read as the latest schema, undecodable records kept with their
reason and bytes; the latest view with and without tombstones."""

from __future__ import annotations

import pytest

from tests.spark_udfs.schema_topics import avro_orders
from tests.spark_udfs.test_data_source import _read, kafka_log  # noqa: F401 -- the fixture

pytestmark = pytest.mark.spark


def _plain(row) -> dict:
    value = row["value"]
    return {
        "key": row["key"], "offset": row["offset"], "timestamp": row["ts"],
        "value": None if value is None else value.asDict(), "valueSchemaId": row["valueSchemaId"],
        "error": row["decodeError"], "valueBytes": row["valueBytes"],
    }  # fmt: skip


def test_records_decoded_with_the_registry_topic_of_the_log_dir(kafka_log, tmp_path):  # noqa: F811
    expected = avro_orders(tmp_path)
    df = _read(kafka_log, tmp_path, subscribe="orders", schemas="log")
    assert df.schema.simpleString() == (
        "struct<key:binary,value:struct<id:bigint,qty:bigint,email:string,status:string>,topic:string,"
        "partition:int,offset:bigint,timestamp:timestamp,timestampType:int,keySchemaId:int,valueSchemaId:int,"
        "keyBytes:binary,valueBytes:binary,decodeError:string>"
    )
    rows = [_plain(r) for r in df.selectExpr("*", "unix_millis(timestamp) AS ts").orderBy("offset").collect()]
    for got, want in zip(rows, expected, strict=True):
        error, want_error = got.pop("error"), want.pop("error")
        assert got == want
        assert (error is None) == (want_error is None) and (want_error or "") in (error or "")
    assert rows[9]["valueBytes"] == expected[9]["valueBytes"]
    assert df.where("keyBytes = key").count() == len(expected)


def test_latest_view_of_a_decoded_topic_with_and_without_tombstones(kafka_log, tmp_path):  # noqa: F811
    expected = avro_orders(tmp_path)
    last = {}
    for row in expected:
        last[row["key"]] = row
    latest = _read(kafka_log, tmp_path, subscribe="orders", schemas="log", level="latest")
    assert {r["key"] for r in latest.collect()} == {k for k, r in last.items() if r["offset"] != 8}
    with_tombstones = _read(
        kafka_log, tmp_path, subscribe="orders", schemas="log", level="latest", includeTombstones="true"
    )
    found = {r["key"]: r for r in with_tombstones.collect()}
    assert set(found) == set(last)
    assert found[b"k1"]["value"] is None and found[b"k1"]["decodeError"] is None


def test_schemas_decode_one_topic(kafka_log, tmp_path):  # noqa: F811
    avro_orders(tmp_path)
    with pytest.raises(Exception, match="exactly one topic"):  # the source's UsageError, through Spark
        _read(kafka_log, tmp_path, subscribePattern="o.*", schemas="log").collect()
