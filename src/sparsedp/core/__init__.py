"""sparsedp.core: the bottom layer every other package may import (and which imports nothing of sparsedp but
:mod:`sparsedp.errors`).

It holds what mechanisms and engines share, so that they never import each other
(``docs/architecture.md``, "Layers"):

* :mod:`.histogram` — :class:`~.histogram.SparseHistogram` and :class:`~.histogram.Release`, the values a
  histogram mechanism consumes and produces;
* :mod:`.bounded` — what an engine hands a mechanism: the bounded histogram held in this process, its
  curator statistics, released rows, distinct and kept (unit, key) pairs, the one-group-per-unit rows;
* :mod:`.unit_keys` — the per-unit key counts the automatic bound chooses from;
* :mod:`.engine` — the engine protocol (:class:`~.engine.Engine`) with its declared
  :class:`~.engine.Capability` set;
* :mod:`.key_order` and :mod:`.noise_chunks` — the canonical key order and the per-release noise chunks, the
  conventions every engine and the public-key mechanisms follow so that one seeded release gives one table;
* :mod:`.sources` — recognising inputs (frames, relations, SQL, files); :mod:`.checks` — the column check and the
  translation of data-library errors every reader shares;
* :mod:`.lazy` — own modules imported on first use (what keeps a fresh process's first release small);
  :mod:`.arrow_arrays` — numpy/Arrow columns and row selections without pandas or ``pyarrow.compute``.

Nothing is imported here, so ``import sparsedp`` stays light.
"""
