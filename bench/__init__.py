"""``make bench``: the benchmark (``bench.run``) and its measurements."""

import os

from kafka_log_core import numba_cache

# bench's own cached functions (phases, codec_parts, murmur3) call the package's kernels, and numba checks a
# cached function against its own file only: their cache goes when the package's kernels change.
numba_cache.drop_stale(outside=os.path.dirname(os.path.abspath(__file__)))
