"""Every failure of a file operation names the file and the operation (issue #24 point 6): a full disk
(ENOSPC, on a real 64 KiB tmpfs when this user may mount one), a directory where a file should be
(EISDIR), a missing file, never a bare ``[Errno N]``."""

from __future__ import annotations

import contextlib
import errno
import subprocess

import pytest

from kafka_log_core import fsutil
from kafka_log_core.errors import FileOperationError, KafkaLogError, describe_os_error


@pytest.fixture
def tiny_disk(tmp_path):
    """A 64 KiB tmpfs mounted for the test (skipped where this user may not mount)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_names_the_file_being_written(tiny_disk):
    target = tiny_disk / "00000000000000000000.index"
    with pytest.raises(FileOperationError) as raised:
        fsutil.write_bytes_fsync(target, bytes(1 << 20))
    err = raised.value
    assert err.errno == errno.ENOSPC and isinstance(err, OSError) and isinstance(err, KafkaLogError)
    assert str(err) == f"{target}: writing: No space left on device (ENOSPC)"


def test_a_full_disk_while_writing_a_cleaned_segment_names_it(tiny_disk):
    target = tiny_disk / "00000000000000000000.log.cleaned"
    out = fsutil.WriteFile(target)
    with pytest.raises(FileOperationError, match=rf"{target}: writing: No space left on device \(ENOSPC\)"):
        for _ in range(64):
            out.write(bytes(4096))
        out.fsync()
    with contextlib.suppress(OSError):
        out.close()


def test_a_file_sent_to_disk_piece_by_piece_as_it_is_written_holds_every_piece_in_order(tmp_path):
    target = tmp_path / "00000000000000000000.log.cleaned"
    pieces = [bytes([i + 1]) * ((1 << 20) + 4093 * i) for i in range(5)]  # sizes off the page boundaries
    out = fsutil.WriteFile(target)
    for piece in pieces:
        out.write(piece)
        out.start_writeback()
    out.start_writeback()  # nothing new: nothing to send
    out.fsync()
    out.close()
    assert target.read_bytes() == b"".join(pieces)


def test_an_atomic_write_on_a_full_disk_leaves_the_old_file_and_no_temporary_one(tiny_disk):
    target = tiny_disk / "cleaner-offset-checkpoint"
    target.write_text("0\n0\n")
    with pytest.raises(FileOperationError, match="cleaner-offset-checkpoint.tmp: writing: No space left"):
        fsutil.atomic_write_bytes(target, bytes(1 << 20))
    assert target.read_text() == "0\n0\n" and [p.name for p in tiny_disk.iterdir()] == [target.name]


def test_writing_where_a_directory_stands_names_it(tmp_path):
    target = tmp_path / "00000000000000000050.log"
    target.mkdir()
    with pytest.raises(FileOperationError, match=rf"{target}: writing: Is a directory \(EISDIR\)"):
        fsutil.write_bytes_fsync(target, b"x")


def test_any_os_error_is_said_with_its_file_and_never_as_a_bare_errno(tmp_path):
    try:
        open(tmp_path / "missing.log", "rb")
    except OSError as err:
        line = describe_os_error(err)
    assert line == f"{tmp_path / 'missing.log'}: No such file or directory (ENOENT)"
    assert "[Errno" not in line
