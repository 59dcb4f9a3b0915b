"""One error hierarchy for everything the core refuses or cannot read.

Every message names the file, the byte position or offset, and what was expected against what was
found, so that a job can print it as one line and go on with the other partitions. Errors that
describe bad data also derive from ``ValueError``; errors that describe a refused operation derive
from ``RuntimeError``.
"""

from __future__ import annotations

import errno
import os


class KafkaLogError(Exception):
    """Root of every error raised by kafka_log_core."""


def _where(path: str | os.PathLike[str] | None, position: int | None) -> str:
    if path is None:
        return "" if position is None else f"position {position}: "
    name = os.fspath(path)
    return f"{name}: " if position is None else f"{name} at position {position}: "


class CorruptDataError(KafkaLogError, ValueError):
    """Bytes on disk do not follow Kafka's format."""

    def __init__(
        self, message: str, path: str | os.PathLike[str] | None = None, position: int | None = None
    ) -> None:
        self.path = None if path is None else os.fspath(path)
        self.position = position
        self.detail = message
        super().__init__(_where(path, position) + message)

    def at(self, path: str | os.PathLike[str] | None, base_position: int = 0) -> CorruptDataError:
        """The same error re-anchored to a file and an absolute position (for errors raised on buffers)."""
        position = None if self.position is None else self.position + base_position
        return type(self)(self.detail, path if path is not None else self.path, position)


class CorruptRecordError(CorruptDataError):
    """A record batch, record or legacy message is malformed (length, CRC, varint, field overrun)."""


class CompressionError(CorruptRecordError):
    """A compressed record area cannot be decompressed, or names an unknown codec."""


class CorruptIndexError(CorruptDataError):
    """An .index, .timeindex or .txnindex file fails Kafka's sanity checks."""


class CorruptCheckpointError(CorruptDataError):
    """A checkpoint, leader-epoch, partition.metadata or producer snapshot file is malformed."""


class NotRegularFileError(CorruptDataError):
    """A log file's name (segment, index, snapshot, checkpoint, properties) on something that is not a
    regular file: a FIFO, a device, a socket, a directory. Never opened for reading (a FIFO would block)."""


class FileOperationError(KafkaLogError, OSError):
    """An operating-system error on a file, said with the file and the operation: ``<path>: writing: No space
    left on device (ENOSPC)``. Still an OSError with its errno, for code that tells errors apart by it."""

    def __init__(self, operation: str, path: str | os.PathLike[str], err: OSError) -> None:
        super().__init__(err.errno, err.strerror or str(err), os.fspath(path))
        self.operation = operation

    def __str__(self) -> str:
        return f"{self.filename}: {self.operation}: {describe_errno(self)}"


def describe_errno(err: OSError) -> str:
    """An OSError's text without the ``[Errno N]`` prefix: its message and the errno's name."""
    name = errno.errorcode.get(err.errno) if err.errno is not None else None
    return f"{err.strerror or err}" + (f" ({name})" if name else "")


def describe_os_error(err: OSError) -> str:
    """One line for any OSError: the file(s) it names and what went wrong, never a bare ``[Errno N]``."""
    if isinstance(err, KafkaLogError):
        return str(err)
    where = "" if err.filename is None else f"{os.fspath(err.filename)}: "
    also = "" if err.filename2 is None else f" (with {os.fspath(err.filename2)})"
    return f"{where}{describe_errno(err)}{also}"


class ConfigError(KafkaLogError, ValueError):
    """An unknown configuration name or a value Kafka would reject."""


class UsageError(KafkaLogError, ValueError):
    """A bad command-line option or argument."""


class RefusedError(KafkaLogError, RuntimeError):
    """An operation the tool will not perform on this data (protected or unsafe)."""


class LogDirLockedError(RefusedError):
    """The log directory's .lock is held (a running broker) or another job holds our partition lock."""


class PartitionBusyError(LogDirLockedError):
    """Another kafka-log-jobs process (or task) is writing this partition now: skipped, not failed."""


class ReadOnlyLogDirError(RefusedError):
    """A job that writes was pointed at a log dir it cannot write (read-only mount, no permission)."""


class SafetyGuardError(RefusedError):
    """A run would delete more than the safety guard allows; names the flag that overrides it."""


class InsufficientSpaceError(RefusedError):
    """Not enough free space on the file system to write the cleaned copy."""


class RecordTooLargeError(RefusedError):
    """A record is larger than ``max.decompressed.message.bytes``: Kafka 4.4's cleaner fails on it."""


class HighWatermarkMissingError(RefusedError):
    """--require-high-watermark was given and the partition has no replication-offset-checkpoint entry."""


class SchemaError(KafkaLogError, ValueError):
    """A schema from the Schema Registry (its ``_schemas`` topic, a schema file) that cannot be read or
    cannot be a table's columns: names the subject, version or id, and the schema's offset or file."""


class UndecodableError(KafkaLogError, ValueError):
    """One record's key or value cannot be decoded with the schema it names (unknown id, truncated
    payload, not the wire format): the record goes to the side table with this reason."""
