"""One partition's log as the broker keeps it: segments (``.log`` + indexes), the partition log, building a
segment's indexes, the log dir with its checkpoints, and the locks that keep a broker and a job apart; the
listing of partition directories (``listing``) the jobs and the data source start from.

The log and its log dir carry out every change to their files (``segment_files``: ``.deleted`` renames,
swaps, rolls, cuts; ``log_dir.update_checkpoints``: every checkpoint entry, under the log dir's lock); the
rules decide what changes.

May import the root modules, ``format`` and ``kernels``; imported by ``rules``, ``work``, ``tools``.
"""
