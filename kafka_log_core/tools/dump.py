"""``kafka-log-jobs dump``: the lines Kafka 4.x's ``kafka-dump-log`` prints, byte for byte.

Kafka's tool (``org.apache.kafka.tools.DumpLogSegments``) picks a dumper by the text after the last
``.`` of each file name and prints, for each file, ``Dumping <file>`` and then:

``.log`` (and KRaft ``.checkpoint`` snapshots, same batches)::

    Log starting offset: <offset in the file name>       (.checkpoint: Snapshot end offset: O, epoch: E)
    baseOffset: B lastOffset: L count: C baseSequence: S lastSequence: LS producerId: P producerEpoch: E
      partitionLeaderEpoch: PLE isTransactional: T isControl: C deleteHorizonMs: OptionalLong[H]|OptionalLong.empty
      position: POS <CreateTime|LogAppendTime>: MAXTS size: SIZE magic: 2 compresscodec: none crc: CRC isvalid: V
    offset: O position: POS <type>: TS size: SIZE magic: 0|1 compresscodec: C crc: CRC isvalid: V   (legacy)
    | offset: O <type>: TS keySize: K valueSize: V [sequence: S headerKeys: [h1,h2]] [isValid: V crc: C]
      [ endTxnMarker: COMMIT coordinatorEpoch: N | LeaderChange: {json} | ...] [ key: K payload: P]
    Found N invalid bytes at the end of <name>            (only when --max-bytes is not given)

(each batch and record is one line; record lines only with --deep-iteration or --print-data-log.)

``.index``: ``offset: O position: P`` per entry; ``.timeindex``: ``timestamp: T offset: O``;
``.txnindex``: ``version: V producerId: P firstOffset: F lastOffset: L lastStableOffset: S``;
``.snapshot``: ``producerId: P producerEpoch: E coordinatorEpoch: C currentTxnFirstOffset: OptionalLong…
lastTimestamp: T`` and, when the producer has a batch, `` firstSequence: … lastSequence: … lastOffset: …
offsetDelta: … timestamp: …``. Any other suffix: ``Ignoring unknown file <file>`` on stderr.

What the index checks find is collected in a :class:`DumpReport` and printed on stderr after the last
file, as Kafka does (``Mismatches in :…``, ``Found timestamp mismatch in :…``, ``Non-consecutive offsets
in …``), in the order of Kafka's ``HashMap`` of absolute paths.

Deliberate differences from Kafka's tool, all outside its normal output:

* where Kafka dies with a stack trace (a corrupt batch, an index entry pointing nowhere, a missing
  ``.log`` next to an index) these functions raise a :class:`~kafka_log_core.errors.KafkaLogError`
  naming the file and byte position; the lines already produced for that file stand, and the command
  goes on with the next file and exits 1;
* so do a corrupt producer snapshot and a partial batch at the end of a ``.log`` (after Kafka's "Found N
  invalid bytes" line), where Kafka prints a message or that line and exits 0;
* ``--index-sanity-check`` reads only the index itself (Kafka also opens the ``.log`` and ``.index``);
* the decoders offered are ``--offsets-decoder``, ``--transaction-log-decoder``,
  ``--share-group-state-decoder`` (:mod:`~kafka_log_core.tools.coordinator_records`),
  ``--cluster-metadata-decoder`` (:mod:`~kafka_log_core.tools.cluster_metadata_text`),
  ``--remote-log-metadata-decoder`` (:mod:`~kafka_log_core.tools.remote_log_metadata_text`) and, for
  ``--key-decoder-class`` / ``--value-decoder-class``, the four classes Kafka ships (:data:`DECODER_CLASSES`):
  Kafka loads any class, we refuse other names; ``DefaultDecoder``'s ``[B@<identity hash>`` has the bytes'
  CRC32 in place of the hash; a number decoder short of bytes is an error naming the record (Kafka dies).
"""

from __future__ import annotations

import os
import re
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from kafka_log_core import storage
from kafka_log_core.constants import MAX_INT
from kafka_log_core.errors import (
    CorruptDataError,
    CorruptIndexError,
    CorruptRecordError,
    KafkaLogError,
    UsageError,
)
from kafka_log_core.format import (
    compression,
    legacy_records,
    log_file,
    message_schema,
    offset_index,
    producer_snapshot,
    record_batch,
    time_index,
)
from kafka_log_core.format.index_base import read_index_file
from kafka_log_core.format.kafka_message import UUID_SIZE, MessageReader
from kafka_log_core.format.log_file import FileBatch
from kafka_log_core.format.message_schema import Field, Schema
from kafka_log_core.format.producer_snapshot import ProducerSnapshotEntry
from kafka_log_core.format.record_batch import BatchHeader, Record
from kafka_log_core.format.txn_index import ENTRY as TXN_ENTRY
from kafka_log_core.format.txn_index import ENTRY_SIZE as TXN_ENTRY_SIZE
from kafka_log_core.format.txn_index import KIND as TXN_KIND
from kafka_log_core.javacompat import JavaHashMap, parse_java_integer
from kafka_log_core.tools import cluster_metadata_text, coordinator_records, remote_log_metadata_text
from kafka_log_core.tools.json_text import to_json

DEFAULT_MAX_BYTES = MAX_INT  # Kafka's default for --max-bytes: "read everything"
DEFAULT_MAX_MESSAGE_SIZE = 5 * 1024 * 1024  # --max-message-size: bytes read at each offset-index position
RECORD_INDENT = "|"
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
STRING_DECODER = "org.apache.kafka.tools.api.StringDecoder"  # --key/--value-decoder-class's default
_DUMP_WINDOW = 8 * 1024 * 1024  # bytes of a .log read at a time
_SCAN_WINDOW = 16 * 1024  # from an index position the wanted batch is usually a few KiB away
_WARM_INDEX_BYTES = 8192  # AbstractIndex: lookups first search the last 8 KiB of entries
_SIZE_AND_MAGIC = struct.Struct(">qi4xb")  # offset, size, (leader epoch / crc), magic at byte 16
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_LAST_OFFSET_DELTA_AT = 23  # in a v2 header
_CONTROL_TYPE_ABORT_OR_COMMIT = (record_batch.CONTROL_ABORT, record_batch.CONTROL_COMMIT)


@dataclass(frozen=True, slots=True)
class DumpOptions:
    """kafka-dump-log's switches, with its names and defaults."""

    deep_iteration: bool = False
    print_data_log: bool = False  # implies deep iteration
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    skip_record_metadata: bool = False
    decoder: str = ""  # a coordinator_records decoder or CLUSTER_METADATA (implies print_data_log), or none
    key_decoder: str = STRING_DECODER  # --key-decoder-class / --value-decoder-class: DECODER_CLASSES
    value_decoder: str = STRING_DECODER
    max_batch_bytes: int = compression.MAX_BATCH_BYTES  # the most one batch's records may decompress to

    def __post_init__(self) -> None:
        for side in (self.key_decoder, self.value_decoder):
            if side not in DECODER_CLASSES:
                raise UsageError(unknown_decoder_class(side))
        for name in ("max_bytes", "max_message_size"):
            value = getattr(self, name)
            if not 0 <= value <= MAX_INT:
                raise UsageError(f"{name}={value}: expected 0..{MAX_INT}")

    @property
    def is_deep(self) -> bool:
        return self.deep_iteration or self.print_data_log


@dataclass(frozen=True, slots=True)
class Line:
    """One output line; ``stderr`` for the lines Kafka writes to standard error."""

    text: str
    stderr: bool = False


@dataclass(frozen=True, slots=True)
class DumpedFile:
    """A ``--files`` entry named the way ``java.io.File`` names it in Kafka's output."""

    shown: str  # as given, with repeated and trailing '/' removed ("Dumping <shown>")
    name: str  # last path component
    absolute: str  # cwd-joined, not resolved (keys of the end-of-run reports)

    @classmethod
    def of(cls, arg: str | os.PathLike[str], cwd: str | None = None) -> DumpedFile:
        shown = re.sub("/+", "/", os.fspath(arg))
        if len(shown) > 1 and shown.endswith("/"):
            shown = shown[:-1]
        if shown.startswith("/"):
            absolute = shown
        else:
            base = os.getcwd() if cwd is None else cwd
            absolute = base + "/" + shown if shown else base
        return cls(shown, shown.rsplit("/", 1)[-1], absolute)

    @property
    def suffix(self) -> str | None:
        """Text from the last '.' of the name, None when there is none."""
        dot = self.name.rfind(".")
        return None if dot < 0 else self.name[dot:]

    @property
    def prefix(self) -> str:
        """Text before the first '.' of the name (the segment's base offset)."""
        return self.name.split(".")[0]

    def sibling(self, suffix: str) -> Path:
        """The segment file with the same prefix and another suffix (``.log`` next to an ``.index``)."""
        return Path(self.absolute).parent / (self.prefix + suffix)


@dataclass
class DumpReport:
    """What the index checks and deep iteration find, printed on stderr after the last file.

    Keyed by absolute path. Index mismatches map an index offset to the batch's last offset (reported
    from the highest index offset down), the time-index lists hold pairs in the order found, and the
    non-consecutive offsets map an offset to the one that followed it (reported in ascending order).
    """

    index_mismatches: JavaHashMap[dict[int, int]] = field(default_factory=JavaHashMap)
    time_index_mismatches: JavaHashMap[list[tuple[int, int]]] = field(default_factory=JavaHashMap)
    time_index_out_of_order: JavaHashMap[list[tuple[int, int]]] = field(default_factory=JavaHashMap)
    time_index_offsets_not_found: JavaHashMap[list[tuple[int, int]]] = field(default_factory=JavaHashMap)
    non_consecutive_offsets: JavaHashMap[dict[int, int]] = field(default_factory=JavaHashMap)

    def lines(self) -> list[str]:
        out: list[str] = []
        for path, by_offset in self.index_mismatches.items():
            out.append(f"Mismatches in :{path}")
            out += [
                f"  Index offset: {a}, log offset: {b}" for a, b in sorted(by_offset.items(), reverse=True)
            ]
        for path, pairs in self.time_index_mismatches.items():
            out.append(f"Found timestamp mismatch in :{path}")
            out += [f"  Index timestamp: {a}, log timestamp: {b}" for a, b in pairs]
        for path, pairs in self.time_index_out_of_order.items():
            out.append(f"Found out of order timestamp in :{path}")
            out += [f"  Index timestamp: {a}, Previously indexed timestamp: {b}" for a, b in pairs]
        for path, pairs in self.time_index_offsets_not_found.items():
            out.append(f"The following indexed offsets are not found in :{path}")
            out += [f"Indexed offset: {a}, found log offset: {b}" for a, b in pairs]
        for path, following in self.non_consecutive_offsets.items():
            out.append(f"Non-consecutive offsets in {path}")
            out += [f"  {a} is followed by {b}" for a, b in sorted(following.items())]
        return out


# ---------------------------------------------------------------------------------------------- files
def dump_file(arg: str | os.PathLike[str], options: DumpOptions, report: DumpReport) -> Iterator[Line]:
    """All the lines for one ``--files`` entry; raises KafkaLogError / OSError when the file cannot be read."""
    file = DumpedFile.of(arg)
    yield Line(f"Dumping {file.shown}")
    dumper = _DUMPERS.get(file.suffix or "")
    if dumper is None:
        yield Line(f"Ignoring unknown file {file.shown}", stderr=True)
        return
    yield from dumper(file, options, report)


def _dump_log_file(file: DumpedFile, options: DumpOptions, report: DumpReport) -> Iterator[Line]:
    header = (
        _snapshot_header(file)
        if file.suffix == ".checkpoint"
        else f"Log starting offset: {_base_offset(file)}"
    )
    yield Line(header)
    with LogReader(file.absolute, options.max_bytes) as log:
        yield from log_lines(log, file, options, report)


def _dump_offset_index_file(file: DumpedFile, options: DumpOptions, report: DumpReport) -> Iterator[Line]:
    data = read_index_file(file.absolute, offset_index.OffsetIndex.KIND, offset_index.ENTRY_SIZE)
    index = offset_index.parse_offset_index(data, _base_offset(file), file.shown)
    if len(index) == 0:
        yield Line(f"{file.shown} is empty.")
    elif options.index_sanity_check:
        yield sanity_check_line(index, file)
    else:
        with LogReader(_existing_sibling(file, ".log")) as log:
            yield from offset_index_lines(index, log, file, options, report)


def _dump_time_index_file(file: DumpedFile, options: DumpOptions, report: DumpReport) -> Iterator[Line]:
    base = _base_offset(file)
    data = read_index_file(file.absolute, time_index.TimeIndex.KIND, time_index.ENTRY_SIZE)
    index = time_index.parse_time_index(data, base, file.shown)
    if options.index_sanity_check:
        yield sanity_check_line(index, file)
        return
    sibling = _existing_sibling(file, ".index")
    offsets = offset_index.parse_offset_index(
        read_index_file(sibling, offset_index.OffsetIndex.KIND, offset_index.ENTRY_SIZE), base, sibling
    )
    with LogReader(_existing_sibling(file, ".log")) as log:
        yield from time_index_lines(index, offsets, log, file, options, report)


def _dump_txn_index_file(file: DumpedFile, options: DumpOptions, report: DumpReport) -> Iterator[Line]:
    _base_offset(file)  # Kafka parses it (and fails on a name without one) although it prints nothing of it
    yield from txn_index_lines(read_index_file(file.absolute, TXN_KIND, TXN_ENTRY_SIZE), file)


def _dump_snapshot_file(file: DumpedFile, options: DumpOptions, report: DumpReport) -> Iterator[Line]:
    entries = producer_snapshot.parse_producer_snapshot(_read(file.absolute), file.shown)
    yield from producer_snapshot_lines(entries)


_DUMPERS: dict[str, Callable[[DumpedFile, DumpOptions, DumpReport], Iterator[Line]]] = {
    ".log": _dump_log_file,
    ".checkpoint": _dump_log_file,
    ".index": _dump_offset_index_file,
    ".timeindex": _dump_time_index_file,
    ".snapshot": _dump_snapshot_file,
    ".txnindex": _dump_txn_index_file,
}


def _read(path: str | os.PathLike[str]) -> bytes:
    """Index, snapshot and transaction-index files are small (10 MiB at most by default): read them whole."""
    return storage.read_regular(path)


class LogReader:
    """A ``.log`` read window by window with plain reads, up to ``limit`` bytes.

    Not mapped: a page of a mapping that the broker truncates meanwhile (a follower truncating, a
    preallocated segment trimmed on roll) kills the process with SIGBUS, and reads keep memory bounded.
    """

    def __init__(self, path: str | os.PathLike[str], limit: int | None = None) -> None:
        self.path = os.fspath(path)
        self._handle = storage.open_regular_file(path)  # closed by close() or the with block
        size = os.fstat(self._handle.fileno()).st_size
        self.size = size if limit is None else min(size, limit)  # fixed when opened, like FileRecords

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._handle.close()

    def read(self, position: int, length: int) -> bytes:
        return os.pread(self._handle.fileno(), max(0, min(length, self.size - position)), position)

    def batches(self, start: int = 0, window: int = _DUMP_WINDOW) -> Iterator[FileBatch]:
        """The batches ``log_file.iter_batches`` finds from ``start``, read ``window`` bytes at a time
        (more for a bigger batch); positions are the file's."""
        position = start
        while position + log_file.HEADER_SIZE_UP_TO_MAGIC < self.size:
            chunk = self.read(position, window)
            consumed = 0
            try:
                for batch in log_file.iter_batches(chunk, self.path):
                    consumed = batch.position + batch.size_in_bytes
                    yield replace(batch, position=position + batch.position)
            except CorruptDataError as err:
                raise err.at(None, position) from err
            if consumed == 0:
                if len(chunk) < window or position + len(chunk) >= self.size:
                    return  # what is left is a partial batch (or the file shrank since it was opened)
                window = log_file.LOG_OVERHEAD + _INT32.unpack_from(chunk, 8)[0]  # one batch > the window
            position += consumed


def _existing_sibling(file: DumpedFile, suffix: str) -> Path:
    sibling = file.sibling(suffix)
    if not storage.is_file(sibling):
        raise CorruptIndexError(f"cannot check it: {sibling} does not exist", file.shown)
    return sibling


def _java_long(text: str) -> int | None:
    """``Long.parseLong``: optional sign and decimal digits, in the signed 64-bit range."""
    return parse_java_integer(text)


def _base_offset(file: DumpedFile) -> int:
    value = _java_long(file.prefix)
    if value is None:
        raise CorruptDataError(
            f"the name does not start with an offset ({file.prefix!r} before the first '.')", file.shown
        )
    return value


def _snapshot_header(file: DumpedFile) -> str:
    """KRaft snapshot names are ``<20-digit end offset>-<10-digit epoch>.checkpoint``."""
    if file.name == BOOTSTRAP_CHECKPOINT:
        return "KRaft bootstrap snapshot"
    end_offset = _java_long(file.name[:20]) if len(file.name) >= 31 else None
    epoch = _java_long(file.name[21:31]) if end_offset is not None else None
    if end_offset is None or epoch is None or not -(2**31) <= epoch < 2**31:
        raise CorruptDataError(
            "not a KRaft snapshot name (expected <20-digit end offset>-<10-digit epoch>.checkpoint)",
            file.shown,
        )
    return f"Snapshot end offset: {end_offset}, epoch: {epoch}"


# ---------------------------------------------------------------------------------------------- .log
def log_lines(log: LogReader, file: DumpedFile, options: DumpOptions, report: DumpReport) -> Iterator[Line]:
    """Batch (and with deep iteration record) lines of a log opened up to ``--max-bytes``."""
    valid_bytes = 0
    last_offset = -1
    for batch in log.batches():
        yield Line(batch_line(batch, valid_bytes))
        if options.is_deep:
            for record in _records(batch, options.max_batch_bytes):
                if record.offset != last_offset + 1:
                    report.non_consecutive_offsets.compute_if_absent(file.absolute, dict)[last_offset] = (
                        record.offset
                    )
                last_offset = record.offset
                yield Line(record_line(batch, record, options))
        valid_bytes += batch.size_in_bytes
    trailing = log.size - valid_bytes
    if trailing > 0 and options.max_bytes == DEFAULT_MAX_BYTES:
        yield Line(f"Found {trailing} invalid bytes at the end of {file.name}")
        raise CorruptRecordError(
            f"{trailing} bytes after the last complete batch do not form a batch (truncated segment)",
            file.shown,
            valid_bytes,
        )


def batch_line(batch: FileBatch, position: int) -> str:
    """The shallow line of one batch (v2) or legacy entry; ``position`` = bytes before it in the dump."""
    h = batch.header
    if isinstance(h, BatchHeader):
        horizon = f"OptionalLong[{h.base_timestamp}]" if h.has_delete_horizon else "OptionalLong.empty"
        last_sequence = (
            -1 if h.base_sequence == -1 else _java_increment_sequence(h.base_sequence, h.last_offset_delta)
        )
        first = (
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {last_sequence} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {_java_bool(h.is_transactional)} isControl: {_java_bool(h.is_control)} "
            f"deleteHorizonMs: {horizon}"
        )
        max_timestamp = h.max_timestamp
    else:
        first = f"offset: {h.offset}"
        max_timestamp = h.timestamp
    codec = compression.CODEC_NAMES.get(h.compression)
    if codec is None:
        raise CorruptRecordError(
            f"batch at offset {batch.last_offset} names compression codec {h.compression} (expected 0-4)",
            batch.path,
            batch.position,
        )
    return (
        f"{first} position: {position} {h.timestamp_type.label}: {max_timestamp} "
        f"size: {batch.size_in_bytes} magic: {h.magic} compresscodec: {codec} crc: {h.crc} "
        f"isvalid: {_java_bool(_is_valid(batch))}"
    )


def record_line(batch: FileBatch, record: Record | legacy_records.LegacyRecord, options: DumpOptions) -> str:
    """One ``--deep-iteration`` line: record metadata, then the key and payload with --print-data-log."""
    h = batch.header
    parts: list[str] = []
    if not options.skip_record_metadata:
        parts.append(
            f"{RECORD_INDENT} offset: {record.offset} {h.timestamp_type.label}: "
            f"{record.timestamp} keySize: {_size(record.key)} valueSize: {_size(record.value)}"
        )
        if isinstance(h, BatchHeader):
            sequence = (
                _java_increment_sequence(h.base_sequence, record.offset - h.base_offset)
                if h.base_sequence >= 0
                else -1
            )
            keys = ",".join(header.key for header in record.headers)
            parts.append(f" sequence: {sequence} headerKeys: [{keys}]")
        else:
            # An uncompressed entry is its own record; inner records of a wrapper had their CRC checked.
            valid = _is_valid(batch) if h.compression == compression.NONE else True
            crc = record.crc if isinstance(record, legacy_records.LegacyRecord) else None
            parts.append(f" isValid: {_java_bool(valid)} crc: {crc}")
        if batch.is_control:
            parts.append(_control_text(batch, record))
    if options.print_data_log and not batch.is_control:
        prefix = RECORD_INDENT + " " if options.skip_record_metadata else " "
        key: str | None
        payload: str | None
        if options.decoder == cluster_metadata_text.CLUSTER_METADATA:
            key, payload = None, cluster_metadata_text.payload(record.offset, record.value)
        elif options.decoder == remote_log_metadata_text.REMOTE_LOG_METADATA:
            key, payload = None, remote_log_metadata_text.payload(record.offset, record.value)
        elif options.decoder:
            key, payload = coordinator_records.decode(
                options.decoder, record.offset, record.key, record.value
            )
        else:
            key = _class_decoded(options.key_decoder, record.key, "key", batch, record)
            payload = _class_decoded(options.value_decoder, record.value, "value", batch, record)
        if key is not None:
            parts.append(f"{prefix}key: {key}")
            prefix = " "
        if payload is not None:
            parts.append(f"{prefix}payload: {payload}")
    return "".join(parts)


def _records(batch: FileBatch, max_batch_bytes: int) -> list[Record] | list[legacy_records.LegacyRecord]:
    try:  # a batch of 0 records holding bytes is refused (Kafka never looks at its record area)
        return batch.records(max_batch_bytes)
    except CorruptDataError as err:
        if err.position is None:  # inside a compressed area: name the batch
            raise type(err)(err.detail, batch.path, batch.position) from err
        raise


def _is_valid(batch: FileBatch) -> bool:
    """Kafka's ``isValid``: the stored CRC matches (CRC32C for v2, CRC32 for legacy)."""
    try:
        batch.verify()
    except CorruptRecordError:
        return False
    return True


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _utf8(data: bytes) -> str:
    """Kafka's StringDecoder, ``new String(bytes, UTF_8)``, malformed bytes replaced as Java does.

    Java and Python's "replace" put one U+FFFD per maximal invalid subsequence, with one exception:
    an encoded surrogate (``ED A0..BF`` and its continuation byte, or the first two at the end) is one
    U+FFFD for Java and one per byte for Python. ``ED`` always starts a new sequence for both, so
    splitting there is safe. (Checked against Java 17 on 120,000 random byte strings.)
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "\ufffd".join(part.decode("utf-8", "replace") for part in _ENCODED_SURROGATE.split(data))


_ENCODED_SURROGATE = re.compile(rb"\xed[\xa0-\xbf][\x80-\xbf]?")


# ---------------------------------------------------------------------------------------------- decoder classes
def _fixed_width(size: int) -> Callable[[bytes], str | None]:
    """IntegerDecoder / LongDecoder: ``ByteBuffer.wrap(bytes).getInt()`` (``getLong()``), the first bytes
    big-endian, the rest ignored; fewer bytes is Java's BufferUnderflowException (None here)."""

    def decode(data: bytes) -> str | None:
        if len(data) < size:
            return None
        return str(int.from_bytes(data[:size], "big", signed=True))

    return decode


def _array_identity(data: bytes) -> str:
    """DefaultDecoder hands the ``byte[]`` itself, which Java prints as ``[B@<identity hash>``, a number
    that changes from run to run: the CRC32 of the bytes stands in for it here."""
    return f"[B@{zlib.crc32(data):x}"


#: The decoder classes Kafka 4.4 ships (kafka-tools-api) and what each makes of a key's or value's bytes.
DECODER_CLASSES: dict[str, Callable[[bytes], str | None]] = {
    STRING_DECODER: _utf8,
    "org.apache.kafka.tools.api.IntegerDecoder": _fixed_width(4),
    "org.apache.kafka.tools.api.LongDecoder": _fixed_width(8),
    "org.apache.kafka.tools.api.DefaultDecoder": _array_identity,
}


def unknown_decoder_class(name: str) -> str:
    return (
        f"decoder class {name!r} is not one Kafka ships ({', '.join(sorted(DECODER_CLASSES))}); "
        "other classes cannot be loaded here"
    )


def _class_decoded(
    decoder: str,
    data: bytes | None,
    side: str,
    batch: FileBatch,
    record: Record | legacy_records.LegacyRecord,
) -> str | None:
    if data is None:
        return None
    text = DECODER_CLASSES[decoder](data)
    if text is None:
        raise CorruptRecordError(
            f"record at offset {record.offset}: {decoder.rsplit('.', 1)[-1]} cannot read a number from its "
            f"{len(data)}-byte {side}",
            batch.path,
            batch.position,
        )
    return text


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def _i32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def _java_increment_sequence(sequence: int, increment: int) -> int:
    """DefaultRecordBatch.incrementSequence in Java int arithmetic (wraps 2^31-1 -> 0)."""
    if sequence > _i32(MAX_INT - increment):
        return _i32(increment - (MAX_INT - sequence) - 1)
    return _i32(sequence + increment)


# ---------------------------------------------------------------------------------------------- control records
def _control_text(batch: FileBatch, record: Record | legacy_records.LegacyRecord) -> str:
    try:
        return _control_text_of(record)
    except CorruptRecordError as err:
        raise CorruptRecordError(
            f"control record at offset {record.offset}: {err.detail}", batch.path, batch.position
        ) from err


def _control_text_of(record: Record | legacy_records.LegacyRecord) -> str:
    if not isinstance(record, Record):
        return ""  # only v2 batches have the control flag
    control = record_batch.decode_control_record(record)
    if control.type in _CONTROL_TYPE_ABORT_OR_COMMIT:
        (version,) = _INT16.unpack_from(record.value or b"")
        if version < 0:
            raise CorruptRecordError(f"end transaction marker has negative version {version}")
        return f" endTxnMarker: {control.type_name} coordinatorEpoch: {control.coordinator_epoch}"
    kraft = _KRAFT_CONTROL.get(control.type)
    if kraft is None:
        return f" controlType: UNKNOWN({control.type})"
    label, schema = kraft
    if record.value is None:
        raise CorruptRecordError(f"{control.type_name} control record has a null value")
    r = MessageReader(record.value, error=CorruptRecordError)
    message = message_schema.read_struct(r, schema.fields, 0, schema.flexible(0))
    (version,) = _INT16.unpack_from(record.value)  # the stored "version" field, read above
    return label + to_json(message_schema.as_json(schema.fields, message, version))


# KRaft control record values (clients/src/main/resources/common/message/*.json), read the way Kafka
# reads them (at version 0) and written as its generated JSON converters write them, at the version
# stored in the record's own "version" field (a field version 0 lacks is written as its default).
_LEADER_CHANGE_VOTER = (
    Field("voterId", "int32"),
    Field("voterDirectoryId", "uuid", "1+", default=bytes(UUID_SIZE)),
)
_KRAFT_VOTER = (
    Field("voterId", "int32"),
    Field("voterDirectoryId", "uuid"),
    Field(
        "endpoints", "[]", fields=(Field("name", "string"), Field("host", "string"), Field("port", "uint16"))
    ),
    Field(
        "kRaftVersionFeature",
        "{}",
        fields=(Field("minSupportedVersion", "int16"), Field("maxSupportedVersion", "int16")),
    ),
)
_VERSION = Field("version", "int16")
_KRAFT_CONTROL: dict[int, tuple[str, Schema]] = {
    2: (
        " LeaderChange: ",
        Schema(
            (
                _VERSION,
                Field("leaderId", "int32"),
                Field("voters", "[]", fields=_LEADER_CHANGE_VOTER),
                Field("grantingVoters", "[]", fields=_LEADER_CHANGE_VOTER),
            ),
            flexible_from=0,
        ),
    ),
    3: (" SnapshotHeader ", Schema((_VERSION, Field("lastContainedLogTimestamp", "int64")), flexible_from=0)),
    4: (" SnapshotFooter ", Schema((_VERSION,), flexible_from=0)),
    5: (" KRaftVersion ", Schema((_VERSION, Field("kRaftVersion", "int16")), flexible_from=0)),
    6: (" KRaftVoters ", Schema((_VERSION, Field("voters", "[]", fields=_KRAFT_VOTER)), flexible_from=0)),
}


# ---------------------------------------------------------------------------------------------- indexes
def sanity_check_line(index: offset_index.OffsetIndex | time_index.TimeIndex, file: DumpedFile) -> Line:
    """--index-sanity-check: the check the broker's tools run; raises CorruptIndexError when it fails."""
    index.sanity_check()
    return Line(f"{file.shown} passed sanity check.")


def offset_index_lines(
    index: offset_index.OffsetIndex,
    log: LogReader,
    file: DumpedFile,
    options: DumpOptions,
    report: DumpReport,
) -> Iterator[Line]:
    """``offset: O position: P`` per entry, checking that the batch at P ends at O (``log`` = the .log)."""
    for n, entry in enumerate(index):
        if entry.offset == index.base_offset and n > 0:
            return  # a zero-filled tail after a crash: Kafka stops at the first repeated base offset
        try:
            found = _first_batch_last_offset(log, entry.position, options.max_message_size)
        except CorruptRecordError as err:
            raise err.at(log.path) from err
        if found is None:
            raise CorruptIndexError(
                f"entry {n} (offset {entry.offset}) points at position {entry.position}, where no batch of at "
                f"most {options.max_message_size} bytes starts in the {log.size}-byte log",
                file.shown,
                n * offset_index.ENTRY_SIZE,
            )
        if found != entry.offset:
            report.index_mismatches.compute_if_absent(file.absolute, dict)[entry.offset] = found
        if not options.verify_index_only:
            yield Line(f"offset: {entry.offset} position: {entry.position}")


def _first_batch_last_offset(log: LogReader, position: int, max_bytes: int) -> int | None:
    """Last offset of the batch at ``position`` when it fits in ``max_bytes`` (FileRecords.slice)."""
    if not 0 <= position <= log.size:
        return None
    end = min(position + max_bytes, log.size)
    if position >= end - log_file.HEADER_SIZE_UP_TO_MAGIC:
        return None
    header = log.read(position, record_batch.HEADER_SIZE)
    if len(header) < _SIZE_AND_MAGIC.size:
        return None  # the file shrank since it was opened
    offset, size, magic = _SIZE_AND_MAGIC.unpack_from(header)
    if size < log_file.MIN_ENTRY_SIZE:
        raise CorruptRecordError(
            f"record size {size} is smaller than the minimum record overhead ({log_file.MIN_ENTRY_SIZE})",
            None,
            position,
        )
    if position > end - log_file.LOG_OVERHEAD - size:
        return None
    if magic < record_batch.MAGIC:
        return offset  # a legacy entry's offset is its last offset
    if len(header) < record_batch.HEADER_SIZE:
        raise CorruptRecordError("v2 batch header runs past the end of the log", None, position)
    (last_offset_delta,) = _INT32.unpack_from(header, _LAST_OFFSET_DELTA_AT)
    return offset + last_offset_delta


def time_index_lines(
    index: time_index.TimeIndex,
    offsets: offset_index.OffsetIndex,
    log: LogReader,
    file: DumpedFile,
    options: DumpOptions,
    report: DumpReport,
) -> Iterator[Line]:
    """``timestamp: T offset: O`` per entry, checking T against the records of the batch ending at O."""
    lookup = KafkaIndexLookup(offsets)
    previous_timestamp = record_batch.NO_TIMESTAMP
    for n, entry in enumerate(index):
        if entry.offset == index.base_offset and n > 0:
            return
        position = lookup(entry.offset).position
        if not 0 <= position <= log.size:
            raise CorruptIndexError(
                f"entry {n} (offset {entry.offset}): the offset index sends it to position {position}, "
                f"outside the {log.size}-byte log",
                file.shown,
                n * time_index.ENTRY_SIZE,
            )
        batches = log.batches(position, _SCAN_WINDOW)
        batch = next((b for b in batches if b.last_offset >= entry.offset), None)
        if batch is None or batch.last_offset != entry.offset:
            found = -1 if batch is None else batch.last_offset
            report.time_index_offsets_not_found.compute_if_absent(file.absolute, list).append(
                (entry.offset, found)
            )
        else:
            max_timestamp = max(
                (r.timestamp for r in _records(batch, options.max_batch_bytes)),
                default=record_batch.NO_TIMESTAMP,
            )
            if max_timestamp != entry.timestamp:
                report.time_index_mismatches.compute_if_absent(file.absolute, list).append(
                    (entry.timestamp, max_timestamp)
                )
            if previous_timestamp >= entry.timestamp:
                report.time_index_out_of_order.compute_if_absent(file.absolute, list).append(
                    (entry.timestamp, previous_timestamp)
                )
        if not options.verify_index_only:
            yield Line(f"timestamp: {entry.timestamp} offset: {entry.offset}")
        previous_timestamp = entry.timestamp


class KafkaIndexLookup:
    """OffsetIndex.lookup exactly, also on an unsorted index: a binary search of the last 8 KiB of
    entries when the target lies beyond their first one, else of the others; ``(base, 0)`` below the
    first entry."""

    def __init__(self, index: offset_index.OffsetIndex) -> None:
        self.index = index
        self.offsets = _Offsets(index)  # read entry by entry: never the whole index widened

    def __call__(self, target: int) -> offset_index.OffsetPosition:
        offsets, count = self.offsets, len(self.index)
        if count == 0:
            return offset_index.OffsetPosition(self.index.base_offset, 0)
        first_hot = max(0, count - 1 - _WARM_INDEX_BYTES // offset_index.ENTRY_SIZE)
        if offsets[first_hot] < target:
            lo, hi = first_hot, count - 1
        elif offsets[0] > target:
            return offset_index.OffsetPosition(self.index.base_offset, 0)
        else:
            lo, hi = 0, first_hot
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if offsets[mid] > target:
                hi = mid - 1
            elif offsets[mid] < target:
                lo = mid
            else:
                return self.index.entry(mid)
        return self.index.entry(lo)


class _Offsets:
    """The absolute offset of entry ``n`` of an offset index, read when asked."""

    def __init__(self, index: offset_index.OffsetIndex) -> None:
        self.relative = index.entries["relative_offset"]
        self.base = index.base_offset

    def __getitem__(self, n: int) -> int:
        return self.base + int(self.relative[n])


def txn_index_lines(buf: bytes, file: DumpedFile) -> Iterator[Line]:
    """One line per aborted transaction; a trailing partial entry is ignored, as the broker does."""
    for n in range(len(buf) // TXN_ENTRY_SIZE):
        version, producer_id, first, last, lso = TXN_ENTRY.unpack_from(buf, n * TXN_ENTRY_SIZE)
        if version > 0:
            raise CorruptIndexError(
                f"aborted transaction entry {n} has version {version}, the current version is 0",
                file.shown,
                n * TXN_ENTRY_SIZE,
            )
        yield Line(
            f"version: {version} producerId: {producer_id} firstOffset: {first} lastOffset: {last} "
            f"lastStableOffset: {lso}"
        )


def producer_snapshot_lines(entries: list[ProducerSnapshotEntry]) -> Iterator[Line]:
    for e in entries:
        txn = (
            "OptionalLong.empty"
            if e.current_txn_first_offset < 0
            else f"OptionalLong[{e.current_txn_first_offset}]"
        )
        text = (
            f"producerId: {e.producer_id} producerEpoch: {e.epoch} coordinatorEpoch: {e.coordinator_epoch} "
            f"currentTxnFirstOffset: {txn} lastTimestamp: {e.timestamp}"
        )
        if e.last_offset >= 0:
            text += (
                f" firstSequence: {_java_decrement_sequence(e.last_sequence, e.offset_delta)} "
                f"lastSequence: {e.last_sequence} lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} "
                f"timestamp: {e.timestamp}"
            )
        yield Line(text)


def _java_decrement_sequence(sequence: int, decrement: int) -> int:
    """DefaultRecordBatch.decrementSequence in Java int arithmetic (wraps 0 -> 2^31-1)."""
    if sequence < decrement:
        return _i32(MAX_INT - (decrement - sequence) + 1)
    return _i32(sequence - decrement)


def error_line(err: Exception, arg: str | os.PathLike[str]) -> str:
    """The one stderr line for a file that could not be dumped."""
    if isinstance(err, KafkaLogError):
        return f"error: {err}"
    if isinstance(err, OSError):
        return f"error: {err.filename or os.fspath(arg)}: {err.strerror or err}"
    return f"error: {os.fspath(arg)}: unexpected {type(err).__name__}: {err}"
