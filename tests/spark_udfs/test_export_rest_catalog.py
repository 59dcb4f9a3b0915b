"""export into a real Iceberg REST catalog (Iceberg's own REST catalog server, started on 127.0.0.1 by
tests/iceberg_rest_harness.py): the tables read back through Spark SQL and through pyiceberg's REST client,
and the export's state kept in the snapshot the REST catalog committed."""

from __future__ import annotations

import json

import pytest

from jobs import export
from jobs.tables import IcebergCatalog
from kafka_log_core.work.table_state import STATE_KEY
from tests.spark_udfs.test_data_source import _payments_dir, _rebuilt_state

pytestmark = pytest.mark.spark


def test_the_latest_view_into_a_rest_catalog_read_by_spark_sql_and_pyiceberg(spark, tmp_path, iceberg_rest):
    written = _payments_dir(tmp_path / "logs")
    catalog = IcebergCatalog("ice_rest", str(tmp_path / "out"), "rest", iceberg_rest.uri)
    settings = export.ExportSettings(str(tmp_path / "out"), fmt="iceberg", catalog=catalog, incremental=True)
    catalog.configure(spark)
    first = export.run(spark, [str(tmp_path / "logs")], None, settings)
    state = _rebuilt_state(written, committed=True, ends={})
    expected = {(r.topic, r.partition, r.key, r.value, r.offset) for r in state.values()}
    assert {r["status"] for r in first} == {"exported"} and sum(r["rows"] for r in first) == len(expected)
    again = export.run(spark, [str(tmp_path / "logs")], None, settings)  # the state read back from REST
    assert {r["note"] for r in again} == {"since"}
    table = spark.sql("SELECT topic, partition, key, value, offset FROM ice_rest.kafka.topics").collect()
    assert {tuple(r) for r in table} == expected

    from pyiceberg.catalog.rest import RestCatalog

    found = RestCatalog("rest", uri=iceberg_rest.uri).load_table("kafka.topics")
    rows = found.scan().to_arrow().to_pylist()
    assert {(r["topic"], r["partition"], r["key"], r["value"], r["offset"]) for r in rows} == expected
    marks = json.loads(found.current_snapshot().summary[STATE_KEY])["partitions"]
    assert set(marks) == {f"{r['topic']}-{r['partition']}" for r in first}
    assert str(iceberg_rest.warehouse) in found.metadata_location  # the server's warehouse, not ours
