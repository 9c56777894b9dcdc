"""``sparsedp release … --keys FILE``: read a public key list from a file.

* ``.parquet`` / ``.pq`` / ``.csv``: a table holding the ``--by`` column(s) (other columns are ignored);
* any other file: a text file with one key per line (one ``--by`` column only; blank lines are skipped, no
  quoting); the keys are text and take the data's key type when joined (e.g. ``42`` for an integer column).

``--keys COL=FILE[,COL=FILE…]`` (each COL a ``--by`` column; the flag repeatable): a partial key set, the values of those columns
listed publicly (one file each, read as above for that column), the other ``--by`` columns selected privately
(``release(keys={col: values})``, :mod:`sparsedp.mechanisms.mixed_keys`).
"""

from __future__ import annotations

import os
from typing import Sequence

from ..errors import InvalidParameterError
from ..mechanisms import registry

__all__ = ["read_keys", "read_key_set", "read_partial_keys"]


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


def read_key_set(specs: Sequence[str], by: Sequence[str]):
    """``--keys`` (repeatable): one key list file (:func:`read_keys`), or ``COL=FILE[,COL=FILE…]`` naming
    ``--by`` columns, in one flag or several (:func:`read_partial_keys`)."""
    cols = list(by)
    whole = [s for s in specs if "=" not in s or os.path.isfile(s)]
    if whole and len(specs) > 1:
        raise InvalidParameterError(f"--keys {whole[0]}: a key list file lists every public key; it cannot be "
                                    f"combined with another --keys (give one file, or COL=FILE per public column)")
    return read_keys(specs[0], cols) if whole else read_partial_keys(specs, cols)


def read_partial_keys(specs: Sequence[str], by: Sequence[str] | None) -> dict:
    """``--keys COL=FILE[,COL=FILE…]``, the flag repeatable: the mapping ``{col: keys}`` of a partial key set
    (``release(keys=…)``), each file one column of values (:func:`read_keys`); with ``by`` (``release``) every
    COL must be one of the ``--by`` columns, without it (``plan``) any name is taken."""
    mapping = {}
    for spec in specs:
        for item in (x for x in spec.split(",") if x.strip()):
            col, sep, path = (part.strip() for part in item.partition("="))
            if not sep or not col or not path or (by is not None and col not in by):
                where = (f" with COL one of the --by columns ({', '.join(by)})" if by is not None else
                         " (plan takes a partial key set: the public columns' value files)")
                raise InvalidParameterError(f"--keys {spec}: {item.strip()!r} is not COL=FILE{where}")
            if col in mapping:
                raise InvalidParameterError(f"--keys {spec}: the column {col!r} is listed twice")
            mapping[col] = read_keys(path, [col])
    return mapping
