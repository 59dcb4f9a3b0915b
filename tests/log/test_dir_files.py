"""One listing of a partition directory feeding the loader's checks (``filenames.DirFiles``): a segment's
indexes read from the listing (``Segment.read_indexes``, an empty regular file not opened) are what the
segment reads by path (``Segment.offset_index`` / ``time_index``), refusals included."""

from __future__ import annotations

import os
import struct

import pytest

from kafka_log_core.errors import KafkaLogError
from kafka_log_core.format.filenames import DirFiles, list_segment_bases
from kafka_log_core.log.segment import Segment
from tests.hostile import kafka_python_batch

TS = 1_700_000_000_000
STEM = "00000000000000000000"
ENTRIES = 2  # written by the cases that write entries
# What the .index and .timeindex of segment 0 are, one case each.
STATES = ["missing", "empty", "entries", "symlink to empty", "symlink to entries", "fifo", "directory",
          "dangling symlink", "longer than the log needs"]  # fmt: skip


def _entries(suffix: str) -> bytes:
    if suffix == ".index":
        return b"".join(struct.pack(">ii", i, 0) for i in range(ENTRIES))
    return b"".join(struct.pack(">qi", TS + i, i) for i in range(ENTRIES))


def _segment_dir(tmp_path, state: str, suffix: str):
    d = tmp_path / "t-0"
    d.mkdir()
    batches = [kafka_python_batch(i, [(b"k", b"v%d" % i)], ts=TS + i) for i in range(4)]
    (d / f"{STEM}.log").write_bytes(b"".join(batches))
    for other in (".index", ".timeindex"):
        (d / f"{STEM}{other}").touch()
    path = d / f"{STEM}{suffix}"
    path.unlink()
    elsewhere = tmp_path / f"elsewhere{suffix}"
    if state == "empty":
        path.touch()
    elif state == "entries":
        path.write_bytes(_entries(suffix))
    elif state.startswith("symlink to"):
        elsewhere.write_bytes(_entries(suffix) if state.endswith("entries") else b"")
        os.symlink(elsewhere, path)
    elif state == "fifo":
        os.mkfifo(path)
    elif state == "directory":
        path.mkdir()
    elif state == "dangling symlink":
        os.symlink(tmp_path / "nowhere", path)
    elif state == "longer than the log needs":
        path.write_bytes(bytes(12 * 1000))
    return d


def _outcome(read):
    """What reading gives: the index's entries, path and length, or the error's type and message."""
    try:
        index = read()
    except (KafkaLogError, OSError) as err:
        return type(err), str(err)
    return index.entries.tobytes(), index.path, index.file_length


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
@pytest.mark.parametrize("state", STATES)
def test_indexes_read_from_the_listing_are_the_indexes_read_by_path(tmp_path, state, suffix):
    d = _segment_dir(tmp_path, state, suffix)
    name = "offset_index" if suffix == ".index" else "time_index"
    by_path = _outcome(lambda: getattr(Segment.open(d, 0), name))

    def from_listing():
        files = DirFiles.scan(d)
        segment = Segment.open(d, 0, files)
        segment.read_indexes(files)
        return getattr(segment, name)

    assert _outcome(from_listing) == by_path
    if state in ("missing", "empty", "symlink to empty", "dangling symlink"):  # read as no index
        assert by_path[0] == b""
    elif state in ("entries", "symlink to entries"):
        assert by_path[0] == _entries(suffix)
    else:
        assert isinstance(by_path[0], type) and issubclass(by_path[0], KafkaLogError | OSError)


def test_the_listing_gives_the_segment_what_a_stat_of_its_log_gives(tmp_path):
    d = _segment_dir(tmp_path, "entries", ".index")
    (d / "00000000000000000004.log").write_bytes(b"")
    (d / "00000000000000000009.log.deleted").write_bytes(b"")
    files = DirFiles.scan(d)
    assert files.segment_bases() == list_segment_bases(d) == [0, 4]
    for base in (0, 4):
        st = os.stat(d / f"{base:020d}.log")
        segment = Segment.open(d, base, files)
        assert (segment.size, segment.mtime_ms) == (st.st_size, st.st_mtime_ns // 1_000_000)
