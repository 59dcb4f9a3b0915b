"""What a cleaner kept, as one comparable value: the records of a partition directory, in order.

``kept_records(dir)`` walks every ``.log`` of the directory (by base offset) with the readable reader and
hashes each record's offset, key and value (null distinct from empty); timestamps and batch headers stay
out, because a cleaner stamps its own time into them (the delete horizon of a batch with tombstones).
Two directories with the same ``digest`` hold the same records at the same offsets: that is what "the
records Kafka keeps" means in the sweep, beyond the counts its cleaner prints.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

from kafka_log_core.format import log_file

_FIELD = struct.Struct(">qii")  # offset, key length (-1 null), value length (-1 null)


def kept_records(partition_dir: Path) -> dict:
    """``{"records": n, "batches": n, "digest": sha256 hex}`` over every record of every segment."""
    digest = hashlib.sha256()
    records = batches = 0
    for path in sorted(Path(partition_dir).glob("*.log")):
        with open(path, "rb") as f:
            data = f.read()
        for batch in log_file.iter_batches(data, path, strict=True):
            batches += 1
            for r in batch.records():
                key, value = r.key, r.value
                digest.update(
                    _FIELD.pack(
                        r.offset, -1 if key is None else len(key), -1 if value is None else len(value)
                    )
                )
                digest.update(key or b"")
                digest.update(value or b"")
                records += 1
    return {"records": records, "batches": batches, "digest": digest.hexdigest()}
