"""``sparsedp release … --keys FILE``: read a public key list from a file.

* ``.parquet`` / ``.pq`` / ``.csv``: a table holding the ``--by`` column(s) (other columns are ignored);
* any other file: a text file with one key per line (one ``--by`` column only; blank lines are skipped, no
  quoting); the keys are text and take the data's key type when joined (e.g. ``42`` for an integer column).

``--keys COL=FILE[,COL=FILE…]`` (each COL a ``--by`` column): a partial key set, the values of those columns
listed publicly (one file each, read as above for that column), the other ``--by`` columns selected privately
(``release(keys={col: values})``, :mod:`sparsedp.mechanisms.mixed_keys`).
"""

from __future__ import annotations

import os
from typing import Sequence

from ..errors import InvalidParameterError
from ..mechanisms import registry

__all__ = ["read_keys", "read_key_set"]


def read_keys(path: str, by: Sequence[str]):
    """The validated :class:`~sparsedp.mechanisms.public_keys.PublicKeys` of ``path`` for the key columns ``by``
    (errors name ``--keys``)."""
    import polars as pl

    public_keys = registry.builtin_module("public_keys").public_keys  # loads on use (registration order kept)
    if not os.path.isfile(path):
        raise InvalidParameterError(f"--keys {path}: no such file")
    ext = os.path.splitext(path)[1].lower()
    cols = list(by)
    try:
        if ext in (".parquet", ".pq", ".csv"):
            frame = pl.read_parquet(path) if ext != ".csv" else pl.read_csv(path)
            missing = [c for c in cols if c not in frame.columns]
            if missing:
                raise InvalidParameterError(f"--keys {path}: no column {', '.join(map(repr, missing))} (the --by "
                                            f"columns); it has {frame.columns}")
            return public_keys(frame.select(cols), cols)
        if len(cols) != 1:
            raise InvalidParameterError(f"--keys {path}: a text file lists one key per line, for one --by column; "
                                        f"for --by {','.join(cols)} give a .csv or .parquet file with those columns")
        with open(path, encoding="utf-8") as f:
            lines = [ln.rstrip("\r\n") for ln in f]
        values = [ln for ln in lines if ln.strip()]
        return public_keys(pl.DataFrame({cols[0]: values}, schema={cols[0]: pl.String}), cols, from_text=True)
    except InvalidParameterError as e:
        msg = str(e)
        raise InvalidParameterError(msg if msg.startswith("--keys") else f"--keys {path}: {msg}") from None
    except (OSError, UnicodeDecodeError, pl.exceptions.PolarsError) as e:
        raise InvalidParameterError(f"--keys {path}: could not read the file ({e})") from None


def read_key_set(spec: str, by: Sequence[str]):
    """``--keys``: a key list file (:func:`read_keys`), or ``COL=FILE[,COL=FILE…]`` naming ``--by`` columns: the
    mapping ``{col: keys}`` of ``release(keys=…)``'s partial key sets."""
    cols = list(by)
    if "=" not in spec or os.path.isfile(spec):
        return read_keys(spec, cols)
    mapping = {}
    for item in (x for x in spec.split(",") if x.strip()):
        col, sep, path = item.partition("=")
        col, path = col.strip(), path.strip()
        if not sep or col not in cols:
            raise InvalidParameterError(f"--keys {spec}: {item.strip()!r} is not COL=FILE with COL one of the --by "
                                        f"columns ({', '.join(cols)})")
        if col in mapping:
            raise InvalidParameterError(f"--keys {spec}: the column {col!r} is listed twice")
        mapping[col] = read_keys(path, [col])
    return mapping
