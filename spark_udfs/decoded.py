"""Typed keys and values in the ``kafka-log`` rows: the ``schemas`` option.

With schemas (the registry's ``_schemas`` topic in the loaded log dirs, or a schema file), one topic is
read and its ``key`` and ``value`` columns have the types of its subjects' latest schemas
(``<topic>-key``, ``<topic>-value``; a side without a live subject stays binary). Five columns follow
the others::

    keySchemaId int, valueSchemaId int   the schema id each record named (null: not decoded, a tombstone)
    keyBytes binary                      the key as on the log (what the latest view and upserts key on)
    valueBytes binary                    the value as on the log, only where it could not be decoded
    decodeError string                   why the record could not be decoded (null: it was)

A record that cannot be decoded (an id that is no version of the subject, a truncated payload, not the
wire format, a value that does not fit the column's type) keeps its row, with a null ``value`` (and a
null ``key`` when the key is what failed), its bytes and the reason: nothing is dropped silently.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from kafka_log_core.errors import UndecodableError
from kafka_log_core.registry.decoding import KEY, VALUE, SideDecoder, decoders_for
from kafka_log_core.registry.storage import SchemaStore

EXTRA_COLUMNS = ("keySchemaId", "valueSchemaId", "keyBytes", "valueBytes", "decodeError")
EXTRA_TYPES = (pa.int32(), pa.int32(), pa.binary(), pa.binary(), pa.string())


@dataclass(frozen=True)
class TopicDecoders:
    """The key and value decoders of the topic read (None: that side stays bytes)."""

    topic: str
    key: SideDecoder | None
    value: SideDecoder | None

    @classmethod
    def of(cls, store: SchemaStore, topic: str) -> TopicDecoders:
        found = decoders_for(store, topic)
        return cls(topic, found[KEY], found[VALUE])

    def arrow_type(self, side: str) -> pa.DataType:
        decoder = self.key if side == KEY else self.value
        return pa.binary() if decoder is None else decoder.arrow_type

    def describe(self) -> str:
        sides = [
            f"{side}: {d.describe() if d else 'bytes'}" for side, d in ((KEY, self.key), (VALUE, self.value))
        ]
        return f"{self.topic} ({'; '.join(sides)})"


def _decode(decoder: SideDecoder | None, data: bytes | None, side: str) -> tuple[object, int | None]:
    if decoder is None or data is None:
        return data, None
    try:
        return decoder.decode(data)
    except UndecodableError as err:
        raise UndecodableError(f"{side}: {err}") from err


# The columns of a row while a batch is built: the typed key and value, the source's other columns,
# then keySchemaId, valueSchemaId, keyBytes, the raw value, decodeError (the raw value is kept only
# where decodeError is set).
KEY_ID, VALUE_ID, KEY_BYTES, VALUE_BYTES, ERROR = -5, -4, -3, -2, -1


def batches(
    rows: Iterator[tuple], decoders: TopicDecoders, schema: pa.Schema, size: int
) -> Iterator[pa.RecordBatch]:
    """The rows (raw key first, raw value second, as :mod:`spark_udfs.rows` makes them) decoded into
    record batches of ``schema`` (typed key and value, the other columns, :data:`EXTRA_COLUMNS`)."""
    while chunk := list(itertools.islice(rows, size)):
        decoded = []
        for row in chunk:
            key, value = row[0], row[1]
            key_obj = key_id = value_obj = value_id = error = None
            try:
                key_obj, key_id = _decode(decoders.key, key, KEY)
                value_obj, value_id = _decode(decoders.value, value, VALUE)
            except UndecodableError as err:
                error = str(err)
            decoded.append([key_obj, value_obj, *row[2:], key_id, value_id, key, value, error])
        yield _batch(decoded, schema)


def _fails(value, kind: pa.DataType) -> str | None:
    try:
        pa.array([value], type=kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as err:
        return str(err)
    return None


def _batch(decoded: list[list], schema: pa.Schema) -> pa.RecordBatch:
    """One record batch; a key or value that does not fit its column's type makes its row undecodable."""
    for column, side in ((0, KEY), (1, VALUE)):
        kind = schema.field(column).type
        if _fails([row[column] for row in decoded], pa.list_(kind)) is None:
            continue
        for row in decoded:
            reason = _fails(row[column], kind)
            if reason is not None:
                row[1] = row[VALUE_ID] = None
                if column == 0:
                    row[0] = row[KEY_ID] = None
                row[ERROR] = f"{side}: does not fit the column's type {kind}: {reason}"
    for row in decoded:
        if row[ERROR] is None:
            row[VALUE_BYTES] = None
    columns = zip(*decoded, strict=True)
    return pa.RecordBatch.from_arrays(
        [pa.array(list(c), type=f.type) for c, f in zip(columns, schema, strict=True)], schema=schema
    )
