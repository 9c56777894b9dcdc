"""New large arrays on ordinary pages, for the engines' one big write-once array (the pair ids).

numpy asks Linux for transparent huge pages (``madvise(MADV_HUGEPAGE)``) on every allocation of 4 MiB or
more. Where the kernel compacts memory to find a huge page on such a fault (THP ``defrag`` set to
``madvise``, the kernel's default) and memory is fragmented, as on a machine that has run for a while, the
first write to each 2 MiB page waits for that compaction. On the 2-core machine this project is measured
on, writing a new 400 MB array from two threads after reading a file's column took 0.76 s (median of five;
0.11–0.92 s) in numpy's allocation and 0.20 s (0.17–0.22 s) in a private anonymous mapping of our own
(``python benchmarks/first_touch.py --data …``). The sort of the pair ids in place took the same time on
either kind of page (``docs/engines_speed.md``, session 11).

Only the first write is affected: the mapping holds ordinary zeroed pages, and it is unmapped when the last
array that views it is freed.
"""

from __future__ import annotations

import mmap

import numpy as np

__all__ = ["fresh_uint64"]

#: numpy's own threshold for the huge-page advice; smaller arrays are left to numpy.
_MIN_BYTES = 4 << 20


def fresh_uint64(n: int) -> np.ndarray:
    """A new writable ``uint64`` array of ``n`` elements (contents unspecified, as ``np.empty``): from
    ``np.empty`` below 4 MiB, where the platform has no private anonymous mappings or where the mapping fails,
    else a view of a private anonymous ``mmap`` (ordinary pages, zero-filled on first touch)."""
    private, anonymous = getattr(mmap, "MAP_PRIVATE", None), getattr(mmap, "MAP_ANONYMOUS", None)
    if n * 8 < _MIN_BYTES or private is None or anonymous is None:
        return np.empty(n, dtype=np.uint64)
    try:
        mapping = mmap.mmap(-1, n * 8, flags=private | anonymous)
    except OSError:  # e.g. ENOMEM under strict overcommit: numpy's allocation decides (MemoryError), as before
        return np.empty(n, dtype=np.uint64)
    return np.frombuffer(mapping, dtype=np.uint64)
