"""Kafka's message encoding inside record values, read field by field: the flexible versions of the
``*.json`` message definitions (clients' control records, the metadata log's records), as Kafka's
generated ``read`` methods read them.

    unsigned varint        1 to 5 bytes, 7 bits each, low bits first; a set high bit means "more"
    compact string         uvarint N+1 (0 = null), then N bytes of UTF-8
    compact array          uvarint N+1 (0 = null), then N elements
    uuid                   16 bytes
    tagged fields          uvarint count, then per field: uvarint tag, uvarint size, size bytes

One :class:`MessageReader` is a cursor over one value; every read checks the bytes are there and raises
the caller's error type (a :class:`~kafka_log_core.errors.CorruptDataError`) with the position in the
value.
"""

from __future__ import annotations

import struct

from kafka_log_core.errors import CorruptDataError

INT8, INT16, INT32, INT64, UINT16 = (struct.Struct(f) for f in (">b", ">h", ">i", ">q", ">H"))
UUID_SIZE = 16


class MessageReader:
    """A cursor over one record value (``buf[pos:end]``)."""

    __slots__ = ("buf", "pos", "end", "error")

    def __init__(
        self,
        buf: bytes,
        pos: int = 0,
        end: int | None = None,
        error: type[CorruptDataError] = CorruptDataError,
    ) -> None:
        self.buf, self.pos, self.end, self.error = buf, pos, len(buf) if end is None else end, error

    def take(self, n: int, what: str) -> bytes:
        if n < 0 or self.pos + n > self.end:
            raise self.error(f"{what}: {n} bytes needed, {self.end - self.pos} left", None, self.pos)
        data = self.buf[self.pos : self.pos + n]
        self.pos += n
        return data

    def uvarint(self, what: str) -> int:
        value, shift, start = 0, 0, self.pos
        while True:
            if self.pos >= self.end:
                raise self.error(f"{what}: unsigned varint runs past the end", None, start)
            byte = self.buf[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift >= 35:
                raise self.error(f"{what}: unsigned varint longer than 5 bytes", None, start)

    def fixed(self, fmt: struct.Struct, what: str) -> int:
        return fmt.unpack(self.take(fmt.size, what))[0]

    def uuid(self, what: str) -> bytes:
        return self.take(UUID_SIZE, what)

    def length(self, what: str) -> int:
        """The N of a compact string or array (-1: null)."""
        return self.uvarint(what) - 1

    def skip_tagged_fields(self, what: str = "tagged fields") -> None:
        for _ in range(self.uvarint(what)):
            self.uvarint("tag")
            self.take(self.uvarint("tagged field size"), "tagged field")
