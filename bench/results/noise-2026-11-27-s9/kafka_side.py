"""Both sides in one process tree pinned to one vCPU, alternately on fresh copies of one shape, the wide
canary before and after each clean: does Kafka's cleaner slow in the slow phases as ours does?"""

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository
import numpy as np

from bench import noise as N
from bench.kafka_cleaner import CleanerBroker
from bench.probe import _clean_a_copy, _warm_compaction

shape = sys.argv[1]
n = int(sys.argv[2])
src = Path(f"/tmp/i26s5/work/data/sweep/{shape}")
manifest = json.loads(Path(f"/tmp/i26s5/work/data/sweep/{shape}.json").read_text())
nbytes = manifest["partitions"][0]["cleanable_bytes"]
sets = ["cleanup.policy=compact", "min.cleanable.dirty.ratio=0.01", "segment.bytes=16777216"]
now = int(time.time() * 1000)
nxt, wide = N._chase_cycle(N._CHASE_SLOTS), np.arange(N._WIDE_WORDS, dtype=np.uint64)
N._canaries(nxt, wide)
_warm_compaction(sets)
_clean_a_copy(str(src), sets, now)
topics = {f"k{i}": src / "bench-0" for i in range(n)}
rows = []
with CleanerBroker(
    topics,
    Path("/tmp/i26s5/work/data/sweep-warmup/bench-0"),
    segment_bytes=16 * 1024 * 1024,
    dedupe_buffer_bytes=128 * 1024 * 1024,
    work_dir=Path("/tmp/noise9/kwork"),
    log=print,
) as broker:
    for i in range(n):
        c0 = N._canaries(nxt, wide)[2]
        ours = N._clean(src, sets, now, "plain", False, 0)["cpu_ms"]
        c1 = N._canaries(nxt, wide)[2]
        k = broker.clean(f"k{i}", nbytes, digest=False)["cleaner_thread_cpu_seconds"] * 1e3
        c2 = N._canaries(nxt, wide)[2]
        rows.append((c0, ours, c1, k, c2))
        print(
            f"{i:2d} wide {c0:5.1f} ours {ours:6.1f} wide {c1:5.1f} kafka {k:6.1f} wide {c2:5.1f}", flush=True
        )
Path(f"/tmp/noise9/kafka-side-{shape}.json").write_text(json.dumps(rows))
