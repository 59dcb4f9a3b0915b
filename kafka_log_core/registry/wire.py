"""The Confluent wire format of a key or value (Confluent's ``AbstractKafkaSchemaSerDe``)::

offset  size  field
0       1     magic byte, 0
1       4     schema id, big-endian int32 (the registry's id of the writer's schema)
5       ...   Protobuf only: the message indexes, the path of the message in the .proto file:
              a zigzag varint count N, then N zigzag varints (top-level message, nested, ...);
              the common path [0] is written as the single count 0
...           the payload: Avro binary, Protobuf binary, or JSON text (UTF-8)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kafka_log_core.errors import CorruptRecordError, UndecodableError
from kafka_log_core.format.varint import decode_varint

MAGIC_BYTE = 0
#: magic byte, schema id
PREFIX = struct.Struct(">bi")
#: More indexes than any .proto nests messages: a count past it is not the wire format.
MAX_MESSAGE_INDEXES = 100


@dataclass(frozen=True, slots=True)
class Framed:
    schema_id: int
    payload: memoryview
    message_indexes: tuple[int, ...] = ()


def split(data: bytes, *, protobuf: bool = False) -> Framed:
    """The schema id, the message indexes (``protobuf``) and the payload of ``data``."""
    if len(data) < PREFIX.size:
        raise UndecodableError(f"{len(data)} bytes: too short for the wire format (magic byte and schema id)")
    magic, schema_id = PREFIX.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise UndecodableError(f"magic byte {magic}, not {MAGIC_BYTE}: not the Schema Registry wire format")
    view = memoryview(data)
    if not protobuf:
        return Framed(schema_id, view[PREFIX.size :])
    indexes, position = _message_indexes(data, PREFIX.size)
    return Framed(schema_id, view[position:], indexes)


def _message_indexes(data: bytes, position: int) -> tuple[tuple[int, ...], int]:
    try:
        count, position = decode_varint(data, position)
        if count == 0:
            return (0,), position
        if not 0 < count <= MAX_MESSAGE_INDEXES:
            raise UndecodableError(f"message index count {count} at byte {PREFIX.size}")
        indexes = []
        for _ in range(count):
            index, position = decode_varint(data, position)
            if index < 0:
                raise UndecodableError(f"negative message index {index}")
            indexes.append(index)
    except CorruptRecordError as err:
        raise UndecodableError(f"the message indexes are cut short ({err})") from err
    return tuple(indexes), position
