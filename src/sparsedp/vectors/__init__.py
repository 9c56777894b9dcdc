"""Private vector sums and means from a frame or a file (Lebeda (2023) PhD thesis, Ch. 4 and 5).

:func:`vector_sum` and :func:`vector_mean` are query kinds of the one pipeline (:mod:`sparsedp.query`); each
returns a :class:`~sparsedp.report.Result` (:class:`VectorSum`, :class:`VectorMean`). The package's modules:
:mod:`.arguments` (the arguments checked, no data read), :mod:`.calibration` (the sums' noise fixed before any
data is read), :mod:`.reading` (every unit's vector, the input checks, the clipped sums), :mod:`.queries` (the
query kinds and the public functions), :mod:`.results` (what a release returns).
"""

from .queries import vector_mean, vector_sum
from .results import VectorCurator, VectorGuarantee, VectorMean, VectorSum

__all__ = ["VectorGuarantee", "VectorCurator", "VectorSum", "VectorMean", "vector_sum", "vector_mean"]
