"""Real corpora built from text on this machine, beyond ``peers.demo_dataset`` (synthetic search log),
``utility.corpus_dataset`` (Python sources: words and bigrams per file) and ``peers.corpus_dataset`` (Debian
documentation bigrams per file).

``copyright_dataset``: the copyright holders of the Debian packages installed here. Unit = a copyright holder
(the name on a ``Copyright`` line of ``/usr/share/doc/*/copyright``, e-mail addresses, years and "(c)" removed,
lower case); key = the source package (one key per distinct copyright file: the binary packages of one source
share it). Most holders appear in one package (the median unit holds one key), a few (the FSF, Red Hat …) in
dozens: the shape of "author → files touched" in commit histories, where the issue measured auto l0 = 8–32 while
l0 = 1 was best.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

_LINE = re.compile(r"\d{4}(?:\s*[-,–]\s*\d{2,4})*\s*,?\s*(?:by\s+)?(.+)")
_NOISE = re.compile(r"<[^>]*>|\(c\)|©|all rights reserved\.?|\s+", re.I)


def copyright_pairs(root: str = "/usr/share/doc") -> list[tuple[str, str]]:
    """Distinct (holder, package) pairs (module docstring)."""
    pairs: set[tuple[str, str]] = set()
    first: dict[str, str] = {}
    for f in sorted(Path(root).glob("*/copyright")):
        try:
            text = f.read_text("utf-8", errors="replace")
        except OSError:
            continue
        package = first.setdefault(hashlib.sha1(text.encode()).hexdigest(), f.parent.name)
        for line in text.splitlines():
            s = line.strip()
            if not (s.lower().startswith("copyright") or re.match(r"^\d{4}", s)):
                continue
            m = _LINE.search(s)
            if not m:
                continue
            name = _NOISE.sub(" ", m.group(1)).strip(" ,.;:").lower()
            if len(name) >= 3 and re.search(r"[a-z]", name):
                pairs.add((name, package))
    return sorted(pairs)


def copyright_dataset(path: Path) -> dict:
    """Write the copyright corpus (columns ``unit`` int64, ``key`` string) to ``path``; its summary."""
    import polars as pl

    pairs = copyright_pairs()
    names = {n: i for i, n in enumerate(sorted({n for n, _ in pairs}))}
    df = pl.DataFrame({"unit": pl.Series([names[n] for n, _ in pairs], dtype=pl.Int64),
                       "key": pl.Series([k for _, k in pairs], dtype=pl.String)})
    df.write_parquet(path)
    deg = df.group_by("unit").len()["len"]
    return {"name": "Debian copyright holders (unit = holder, key = source package, /usr/share/doc/*/copyright)",
            "rows": df.height, "units": df["unit"].n_unique(), "keys": df["key"].n_unique(),
            "median_keys_per_unit": float(deg.median())}
