"""How a compiled pass talks to Python: statuses and one-row state records.

A kernel runs from ``state.position`` to the end of its byte range and returns ``DONE``, or a
``STOP_*`` / ``ERR_*`` status with ``state.position`` at the batch where Python must act. It stops
only there:

=================  ==============================================================================
STOP_LEGACY        a magic 0/1 entry: the readable legacy path handles it
STOP_COMPRESSED    a compressed batch: Python decompresses the run of compressed batches from there
                   with the codec libraries (one call each) and calls again with their records;
                   the kernel decides them like any other batch
STOP_TXN           the batch reaches the first offset of the next aborted transaction: Python moves
                   it from its heap into the tracker table, then resumes at the same batch
STOP_TXN_TABLE     the tracker's producer table needs more room (resumes at the same batch)
STOP_OUTPUT        pass 2: the output buffer cannot take the next batch: Python writes it out
STOP_SCRATCH       pass 2: the buffer a compressed batch would be rebuilt in is too small: Python
                   makes it larger (so is STOP_AREA_ROOM for the lz4 batches the kernel decompresses)
STOP_CHUNK_ROOM    one batch holds more records than the chunk: Python makes the chunk larger
STOP_MAP_FULL      pass 1: the offset map holds its capacity and a keyed record comes: the round ends
ERR_OFFSETS        a batch's offsets a broker never appends (pass 1, the CRC check): Python names it
ERR_*              corrupt data: Python re-reads the batch with the readable code, which raises the
                   error with the file, the position and the detail
=================  ==============================================================================
"""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------------------------------------- statuses
CONTINUE = -1  # internal: the batch is done, go on
DONE = 0
STOP_LEGACY = 1
STOP_COMPRESSED = 2
STOP_TXN = 3
STOP_TXN_TABLE = 4
STOP_OUTPUT = 5
STOP_MAP_FULL = 6
STOP_SCRATCH = 7  # pass 2: a compressed batch might be rebuilt and the scratch buffer is too small
STOP_CHUNK_ROOM = 14  # one batch holds more records than the chunk: Python makes the chunk larger
STOP_AREA_ROOM = 9  # one lz4 batch decompresses to more than ``karea`` holds: Python makes it larger
ERR_BATCH = 10  # framing: size, truncation, magic, v2 header fields
ERR_CRC = 11
ERR_RECORD = 12  # a record does not walk (state.error holds the kernels.ERR_* code)
ERR_CONTROL = 13  # a control record that is not a readable marker
ERR_OFFSETS = 15  # offsets a broker never appends (``offset_order``): Python names the batch and the problem

STATUS_NAMES = {
    DONE: "done", STOP_LEGACY: "legacy entry", STOP_COMPRESSED: "compressed batch", STOP_TXN: "aborted transaction",
    STOP_TXN_TABLE: "tracker table full", STOP_AREA_ROOM: "decompression buffer too small", STOP_OUTPUT: "output buffer full", STOP_SCRATCH: "rebuild buffer too small", STOP_MAP_FULL: "offset map full",
    ERR_BATCH: "corrupt batch framing",
    ERR_CRC: "CRC mismatch", ERR_RECORD: "corrupt record", ERR_CONTROL: "unreadable control record",
    ERR_OFFSETS: "batch offsets out of order",
}  # fmt: skip


def new_state(dtype: np.dtype, **fields) -> np.ndarray:
    """A one-row state record with ``fields`` set (the rest zero)."""
    state = np.zeros(1, dtype=dtype)
    for name, value in fields.items():
        state[name] = value
    return state
