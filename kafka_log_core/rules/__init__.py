"""The broker's rule sets over one partition: the log cleaner (compaction, with its transaction tracker and
segment passes), retention (time, size, log-start-offset), the log loader (leftover files of an
interrupted operation, crash recovery of segments and producer state) and the producer-state machine that
the loader, the cleaner and the simulator share.

Plans are frozen values, applied in a separate step. May import every layer below (root, ``format``,
``kernels``, ``log``, ``settings``); imported by ``work`` and the simulator.
"""
