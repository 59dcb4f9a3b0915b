"""One partition's log as the broker keeps it: segments (``.log`` + indexes), the partition log, building a
segment's indexes, the log dir with its checkpoints, and the locks that keep a broker and a job apart.

May import the root modules, ``format`` and ``kernels``; imported by ``rules``, ``work``, ``tools``.
"""
