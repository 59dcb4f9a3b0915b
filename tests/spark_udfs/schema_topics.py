"""Log dirs of a producer that used a Schema Registry: the registry's ``_schemas`` topic (its records as
the registry writes them, tests/registry/registry_records.py) and a topic whose values are in the
Confluent wire format (payloads by fastavro, framed by tests/registry/producers.py), written as
kafka-python's batches."""

from __future__ import annotations

from tests.logbuild import write_segment
from tests.registry import producers
from tests.registry import registry_records as rr
from tests.spark_udfs.test_data_source import TS, kp_batch

ORDER_V1, ORDER_V2 = producers.ORDER_V1, producers.ORDER_V2


def registry_dir(log_dir, records: list[tuple[bytes, bytes | None]]) -> None:
    """The ``_schemas`` topic with ``records`` (key, value), one batch."""
    data, _ = kp_batch(0, [(k, v, []) for k, v in records])
    write_segment(log_dir / "_schemas-0", 0, [data])


def avro_orders(log_dir, topic: str = "orders") -> list[dict]:
    """``topic`` (one partition): Avro values of versions 1 and 2 of ``<topic>-value`` (ids 1, 2), string
    keys, a tombstone, and three undecodable values. Returns what a consumer decoding with the latest
    schema gets, one dict per record (``value`` None for a tombstone, ``error`` for the undecodable)."""
    subject = f"{topic}-value"
    registry_dir(
        log_dir,
        [
            (rr.noop_key(), None),
            rr.schema_record(subject, 1, 1, ORDER_V1),
            rr.config_record(subject),
            rr.schema_record(subject, 2, 2, ORDER_V2),
        ],
    )
    v1 = [{"id": i, "name": f"n{i}", "qty": i} for i in range(4)]
    v2 = [{"id": i, "qty": 10 + i, "email": f"e{i}", "status": "paid"} for i in range(2, 6)]
    values = [producers.frame(1, producers.avro_payload(ORDER_V1, v)) for v in v1]
    values += [producers.frame(2, producers.avro_payload(ORDER_V2, v)) for v in v2]
    keys = [b"k%d" % v["id"] for v in v1 + v2]
    expected = [{"id": v["id"], "qty": v["qty"], "email": None, "status": "new"} for v in v1] + v2
    ids = [1] * len(v1) + [2] * len(v2)
    records = [(k, v, []) for k, v in zip(keys, values, strict=True)]
    records += [
        (b"k1", None, []),  # a tombstone
        (b"k6", values[-1][:-3], []),  # truncated
        (b"k7", producers.frame(9, b"\x02"), []),  # an id the registry does not have
        (b"k8", b"plain text", []),  # not the wire format
    ]
    expected += [None, "cut short", "schema id 9 is not a version", "magic byte 112, not 0"]
    ids += [None, None, None, None]
    data, _ = kp_batch(0, records)
    write_segment(log_dir / f"{topic}-0", 0, [data])
    out = []
    for offset, ((key, raw, _), value, schema_id) in enumerate(zip(records, expected, ids, strict=True)):
        row = {"key": key, "offset": offset, "timestamp": TS + offset}
        if isinstance(value, str):
            out.append({**row, "value": None, "valueSchemaId": None, "error": value, "valueBytes": raw})
        else:
            out.append({**row, "value": value, "valueSchemaId": schema_id, "error": None, "valueBytes": None})
    return out
