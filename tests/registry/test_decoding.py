"""Keys and values decoded as their subject's latest schema, by each format's evolution rules, with
payloads written by independent libraries; what cannot be decoded says why."""

from __future__ import annotations

import datetime
import json
import pickle
from decimal import Decimal

import pyarrow as pa
import pytest

from kafka_log_core.errors import SchemaError, UndecodableError
from kafka_log_core.registry.decoding import side_decoder
from kafka_log_core.registry.storage import replay
from tests.registry import producers
from tests.registry import registry_records as rr

AVRO_V1, AVRO_V2 = producers.ORDER_V1, producers.ORDER_V2


def _store(*records):
    return replay([(i, k, v) for i, (k, v) in enumerate(records)])


def _arrow(decoder, values):
    return pa.array(values, type=decoder.arrow_type).to_pylist()


# ------------------------------------------------------------------------------------------ Avro
def test_avro_older_records_are_read_as_the_latest_schema():
    store = _store(rr.schema_record("o-value", 1, 1, AVRO_V1), rr.schema_record("o-value", 2, 2, AVRO_V2))
    decoder = side_decoder(store, "o-value")
    assert decoder.arrow_type == pa.struct(
        [("id", pa.int64()), ("qty", pa.int64()), ("email", pa.string()), ("status", pa.string())]
    )
    old = producers.frame(1, producers.avro_payload(AVRO_V1, {"id": 1, "name": "a", "qty": 3}))
    new = producers.frame(
        2, producers.avro_payload(AVRO_V2, {"id": 2, "qty": 4, "email": "x@y", "status": "paid"})
    )
    values = [decoder.decode(old), decoder.decode(new)]
    assert [schema_id for _, schema_id in values] == [1, 2]
    assert _arrow(decoder, [v for v, _ in values]) == [
        {"id": 1, "qty": 3, "email": None, "status": "new"},  # added with defaults; name removed; int -> long
        {"id": 2, "qty": 4, "email": "x@y", "status": "paid"},
    ]


def test_avro_a_writer_the_latest_schema_cannot_resolve_is_undecodable():
    no_default = json.dumps(
        {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"}, {"name": "must", "type": "string"}]}
    )  # fmt: skip
    store = _store(rr.schema_record("o-value", 1, 1, AVRO_V1), rr.schema_record("o-value", 2, 2, no_default))
    decoder = side_decoder(store, "o-value")
    old = producers.frame(1, producers.avro_payload(AVRO_V1, {"id": 1, "name": "a", "qty": 3}))
    with pytest.raises(UndecodableError, match="must"):
        decoder.decode(old)


def test_avro_truncated_payload_unknown_id_and_not_the_wire_format():
    store = _store(rr.schema_record("o-value", 1, 1, AVRO_V1), rr.schema_record("x-value", 1, 9, '"string"'))
    decoder = side_decoder(store, "o-value")
    whole = producers.frame(1, producers.avro_payload(AVRO_V1, {"id": 1, "name": "abcdef", "qty": 3}))
    with pytest.raises(UndecodableError, match="cut short"):
        decoder.decode(whole[:-4])
    with pytest.raises(UndecodableError, match="schema id 7 is not a version of subject 'o-value'"):
        decoder.decode(producers.frame(7, b"\x02"))
    with pytest.raises(UndecodableError, match="schema id 9 is not a version of subject 'o-value'"):
        decoder.decode(producers.frame(9, b"\x02a"))
    with pytest.raises(UndecodableError, match="magic byte 1, not 0"):
        decoder.decode(b"\x01\x00\x00\x00\x01\x02")
    with pytest.raises(UndecodableError, match="too short"):
        decoder.decode(b"\x00\x00")


def test_avro_types_map_as_spark_from_avro_maps_them():
    schema = json.dumps(
        {"type": "record", "name": "T", "fields": [
            {"name": "b", "type": "boolean"}, {"name": "f", "type": "float"}, {"name": "by", "type": "bytes"},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
            {"name": "fx", "type": {"type": "fixed", "name": "F", "size": 2}},
            {"name": "arr", "type": {"type": "array", "items": "int"}},
            {"name": "m", "type": {"type": "map", "values": "string"}},
            {"name": "il", "type": ["int", "long"]},
            {"name": "u", "type": ["null", "int", "string"]},
            {"name": "d", "type": {"type": "int", "logicalType": "date"}},
            {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "lts", "type": {"type": "long", "logicalType": "local-timestamp-micros"}},
            {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
            {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
            {"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
        ]}
    )  # fmt: skip
    store = _store(rr.schema_record("t-value", 1, 1, schema))
    decoder = side_decoder(store, "t-value")
    t = decoder.arrow_type
    assert [(f.name, str(f.type)) for f in t] == [
        ("b", "bool"), ("f", "float"), ("by", "binary"), ("e", "string"), ("fx", "binary"),
        ("arr", "list<item: int32>"), ("m", "map<string, string>"), ("il", "int64"),
        ("u", "struct<member0: int32, member1: string>"), ("d", "date32[day]"),
        ("ts", "timestamp[us, tz=UTC]"), ("lts", "timestamp[us]"), ("tm", "int32"), ("dec", "decimal128(9, 2)"),
        ("id", "string"),
    ]  # fmt: skip
    ts = datetime.datetime(2026, 1, 2, 3, 4, 5, 6000, tzinfo=datetime.UTC)
    value = {
        "b": True, "f": 1.5, "by": b"\x00", "e": "B", "fx": b"ab", "arr": [1, 2], "m": {"k": "v"}, "il": 7,
        "u": "text", "d": datetime.date(2026, 1, 2), "ts": ts, "lts": datetime.datetime(2026, 1, 2, 3, 4, 5),
        "tm": datetime.time(1, 2, 3, 4000), "dec": Decimal("12.34"), "id": "0b8a4b62-0b1a-4f3a-9a53-2d3c0e2b9a11",
    }  # fmt: skip
    decoded, _ = decoder.decode(producers.frame(1, producers.avro_payload(schema, value)))
    row = _arrow(decoder, [decoded])[0]
    assert row["u"] == {"member0": None, "member1": "text"}
    assert row["tm"] == 3723004
    assert row["m"] == [("k", "v")]
    assert row["ts"] == ts and row["dec"] == Decimal("12.34") and row["id"] == value["id"]


def test_avro_a_recursive_schema_cannot_be_columns():
    linked = json.dumps(
        {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    )
    with pytest.raises(SchemaError, match="recursive type Node"):
        side_decoder(_store(rr.schema_record("n-value", 1, 1, linked)), "n-value")


def test_avro_references_name_types_of_other_subjects():
    money = json.dumps(
        {"type": "record", "name": "Money", "namespace": "shop",
         "fields": [{"name": "cents", "type": "long"}]}
    )  # fmt: skip
    order = json.dumps(
        {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "total", "type": "shop.Money"}]}
    )  # fmt: skip
    refs = [{"name": "shop.Money", "subject": "money", "version": 1}]
    store = _store(
        rr.schema_record("money", 1, 1, money), rr.schema_record("o-value", 1, 2, order, references=refs)
    )
    decoder = side_decoder(store, "o-value")
    full = json.dumps(
        {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "total", "type": json.loads(money)}]}
    )  # fmt: skip
    decoded, _ = decoder.decode(producers.frame(2, producers.avro_payload(full, {"total": {"cents": 5}})))
    assert _arrow(decoder, [decoded]) == [{"total": {"cents": 5}}]


def test_a_decoder_travels_to_executors_by_pickle():
    store = _store(rr.schema_record("o-value", 1, 1, AVRO_V1))
    decoder = pickle.loads(pickle.dumps(side_decoder(store, "o-value")))
    data = producers.frame(1, producers.avro_payload(AVRO_V1, {"id": 1, "name": "a", "qty": 3}))
    assert decoder.decode(data) == ({"id": 1, "name": "a", "qty": 3}, 1)


def test_a_subject_without_a_live_version_is_not_decoded():
    store = _store(rr.schema_record("o-value", 1, 1, AVRO_V1, deleted=True))
    assert side_decoder(store, "o-value") is None
    assert side_decoder(store, "other-value") is None


# ------------------------------------------------------------------------------------------ Protobuf
PROTO_V1 = """syntax = "proto3";
package shop;
message Order {
  int64 id = 1;
  string name = 2;
  int32 qty = 3;
}
"""
PROTO_V2 = """syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
message Order {
  enum Status { NEW = 0; PAID = 1; }
  message Line { string sku = 1; uint64 count = 2; }
  int64 id = 1;
  int32 qty = 3;
  string email = 4;
  optional int32 discount = 5;
  repeated Line lines = 6;
  map<string, int64> totals = 7;
  google.protobuf.Timestamp at = 8;
  google.protobuf.StringValue note = 9;
  Status status = 10;
  oneof pay { string card = 11; string iban = 12; }
}
message Other { int64 x = 1; }
"""


def test_protobuf_older_records_are_read_as_the_latest_message(tmp_path):
    store = _store(
        rr.schema_record("o-value", 1, 1, PROTO_V1, "PROTOBUF"),
        rr.schema_record("o-value", 2, 2, PROTO_V2, "PROTOBUF"),
    )
    decoder = side_decoder(store, "o-value")
    assert [(f.name, str(f.type)) for f in decoder.arrow_type] == [
        ("id", "int64"), ("qty", "int32"), ("email", "string"), ("discount", "int32"),
        ("lines", "list<item: struct<sku: string, count: decimal128(20, 0)>>"), ("totals", "map<string, int64>"),
        ("at", "timestamp[us, tz=UTC]"), ("note", "string"), ("status", "string"), ("card", "string"),
        ("iban", "string"),
    ]  # fmt: skip
    v1 = producers.proto_module(tmp_path, "v1", PROTO_V1)
    v2 = producers.proto_module(tmp_path, "v2", PROTO_V2)
    old = v1.Order(id=1, name="gone", qty=3).SerializeToString()
    new = v2.Order(id=2, qty=4, email="e", discount=0, lines=[v2.Order.Line(sku="s", count=2**63 + 1)],
                   totals={"a": 5}, status=v2.Order.PAID, card="c")  # fmt: skip
    new.at.FromSeconds(1767225600)
    new.note.value = "hi"
    rows = _arrow(decoder, [decoder.decode(producers.frame(1, old, [0]))[0],
                            decoder.decode(producers.frame(2, new.SerializeToString(), [0]))[0]])  # fmt: skip
    assert rows[0] == {
        "id": 1, "qty": 3, "email": "", "discount": None, "lines": [], "totals": [], "at": None, "note": None,
        "status": "NEW", "card": None, "iban": None,
    }  # fmt: skip
    assert rows[1]["discount"] == 0 and rows[1]["card"] == "c" and rows[1]["status"] == "PAID"
    assert rows[1]["lines"] == [{"sku": "s", "count": Decimal(2**63 + 1)}]
    assert rows[1]["at"] == datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    assert rows[1]["note"] == "hi" and rows[1]["totals"] == [("a", 5)]


def test_protobuf_message_indexes_name_the_message(tmp_path):
    store = _store(rr.schema_record("o-value", 1, 1, PROTO_V2, "PROTOBUF"))
    decoder = side_decoder(store, "o-value")
    v2 = producers.proto_module(tmp_path, "v2", PROTO_V2)
    other = v2.Other(x=1).SerializeToString()
    with pytest.raises(UndecodableError, match="message shop.Other, not the table's message shop.Order"):
        decoder.decode(producers.frame(1, other, [1]))
    with pytest.raises(UndecodableError, match=r"message indexes \[5\] name no message"):
        decoder.decode(producers.frame(1, other, [5]))
    line = v2.Order.Line(sku="s").SerializeToString()
    with pytest.raises(UndecodableError, match="shop.Order.Line, not the table's"):
        decoder.decode(producers.frame(1, line, [0, 0]))
    with pytest.raises(UndecodableError, match="Protobuf payload"):
        decoder.decode(producers.frame(1, b"\x0a\x05ab", [0]))


def test_protobuf_the_confluent_serializer_frames_as_we_read(tmp_path):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    v2 = producers.proto_module(tmp_path, "v2", PROTO_V2)
    client = SchemaRegistryClient.new_client({"url": "mock://i28-protobuf"})
    context = SerializationContext("o", MessageField.VALUE)
    order = ProtobufSerializer(v2.Order, client, {"use.deprecated.format": False})(
        v2.Order(id=5, qty=1), context
    )
    other = ProtobufSerializer(v2.Other, client, {"use.deprecated.format": False})(v2.Other(x=9), context)
    schema_id = client.get_latest_version("o-value").schema_id
    store = _store(rr.schema_record("o-value", 1, schema_id, PROTO_V2, "PROTOBUF"))
    decoder = side_decoder(store, "o-value")
    value, found_id = decoder.decode(order)
    assert found_id == schema_id and (value["id"], value["qty"], value["status"]) == (5, 1, "NEW")
    # Other is the file's second message: the serializer wrote the indexes [1]
    with pytest.raises(UndecodableError, match="message shop.Other, not the table's message shop.Order"):
        decoder.decode(other)


def test_protobuf_references_are_imports(tmp_path):
    common = 'syntax = "proto3";\npackage common;\nmessage Money { int64 cents = 1; }\n'
    order = 'syntax = "proto3";\npackage shop;\nimport "common/money.proto";\nmessage Order { common.Money total = 1; }\n'
    refs = [{"name": "common/money.proto", "subject": "money", "version": 1}]
    store = _store(
        rr.schema_record("money", 1, 1, common, "PROTOBUF"),
        rr.schema_record("o-value", 1, 2, order, "PROTOBUF", refs),
    )
    decoder = side_decoder(store, "o-value")
    module = producers.proto_module(tmp_path, "order", order, {"common/money.proto": common})
    data = producers.frame(2, module.Order(total={"cents": 7}).SerializeToString(), [0])
    assert _arrow(decoder, [decoder.decode(data)[0]]) == [{"total": {"cents": 7}}]


def test_protobuf_a_schema_protoc_refuses_names_the_subject():
    store = _store(rr.schema_record("o-value", 1, 1, "syntax = 'proto3'; message {", "PROTOBUF"))
    with pytest.raises(SchemaError, match="subject 'o-value' version 1 .*protoc cannot compile it"):
        side_decoder(store, "o-value")


# ------------------------------------------------------------------------------------------ JSON Schema
JSON_V1 = json.dumps(
    {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}}}
)
JSON_V2 = json.dumps(
    {"type": "object",
     "properties": {"id": {"type": "integer"}, "email": {"type": ["null", "string"], "default": "none"},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "price": {"type": "number"}, "ok": {"type": "boolean"},
                    "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
                    "any": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
                    "addr": {"$ref": "#/definitions/Addr"}},
     "definitions": {"Addr": {"type": "object", "properties": {"city": {"type": "string"}}}}}
)  # fmt: skip


def test_json_schema_older_records_are_fitted_to_the_latest_schema():
    store = _store(
        rr.schema_record("j-value", 1, 1, JSON_V1, "JSON"), rr.schema_record("j-value", 2, 2, JSON_V2, "JSON")
    )
    decoder = side_decoder(store, "j-value")
    assert [(f.name, str(f.type)) for f in decoder.arrow_type] == [
        ("id", "int64"), ("email", "string"), ("tags", "list<item: string>"), ("price", "double"), ("ok", "bool"),
        ("extra", "map<string, int64>"), ("any", "string"), ("addr", "struct<city: string>"),
    ]  # fmt: skip
    old = producers.frame(1, producers.json_payload({"id": 1, "name": "gone"}))
    new = producers.frame(
        2, producers.json_payload({"id": 2.0, "email": "e", "tags": ["a"], "price": 3, "ok": True,
                                   "extra": {"k": 1}, "any": 5, "addr": {"city": "Oslo"}})
    )  # fmt: skip
    rows = _arrow(decoder, [decoder.decode(old)[0], decoder.decode(new)[0]])
    assert rows[0] == {"id": 1, "email": "none", "tags": None, "price": None, "ok": None, "extra": None,
                       "any": None, "addr": None}  # fmt: skip
    assert rows[1] == {"id": 2, "email": "e", "tags": ["a"], "price": 3.0, "ok": True, "extra": [("k", 1)],
                       "any": "5", "addr": {"city": "Oslo"}}  # fmt: skip


def test_json_schema_a_value_of_another_type_is_undecodable():
    store = _store(rr.schema_record("j-value", 1, 1, JSON_V2, "JSON"))
    decoder = side_decoder(store, "j-value")
    with pytest.raises(UndecodableError, match="tags\\[1\\] is integer, not a string"):
        decoder.decode(producers.frame(1, producers.json_payload({"tags": ["a", 1]})))
    with pytest.raises(UndecodableError, match="JSON payload of 5 bytes"):
        decoder.decode(producers.frame(1, b'{"id"'))
    with pytest.raises(UndecodableError, match="the value is array, not an object"):
        decoder.decode(producers.frame(1, b"[1]"))
