"""The amendment of the golden files when per-row intervals became the default (issue 34), with its check.

Run once (``python tests/golden/amend_intervals.py [embedded] [spark] [tables]``): every golden release is
recomputed with the current code (the functions of ``capture.py`` and ``test_release_tables_golden.py``, the same
seeds) and compared with the stored one. The amendment is written only if, for every entry, **every stored value
is unchanged** and the only differences are additions of interval output: table columns named ``<c>_lo`` /
``<c>_hi`` (``<c>`` a stored column) or ``<q>_rank_error``, a "no per-row intervals" note removed where the
mechanism gained intervals (two-stage, stage 2's exact laws), a negative ``count_hi`` now clamped to 0, report notes (``notes``, and the matching ``note``
lines of the printed report) about intervals, and the same in a written file's metadata, whose content hash of the
written table (``table.sha256``) changes with the added columns. ``--cached`` re-checks the recomputation kept in
the temporary folder's parent by a run whose check stopped. Anything else stops
it with the path of the first difference. The files keep their names (the commit they were captured at) and
record the amendment under ``"amended"``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod


capture = _load("golden_capture", HERE / "capture.py")

NOTE = "per-row intervals made the default (issue 34): only <column>_lo/_hi/_rank_error columns and interval " \
       "notes were added; every earlier value was checked unchanged by tests/golden/amend_intervals.py"
#: what an added report note is about
_NOTE_WORDS = ("interval", "rank_error")
#: the note of a mechanism that had no interval; it may go when the mechanism gains them (two-stage's stage 2)
_NO_INTERVALS = "no per-row intervals: "


def _added_column(name: str, old_columns: list[str]) -> bool:
    if name.endswith("_rank_error"):
        return name[: -len("_rank_error")] in old_columns
    return name.endswith(("_lo", "_hi")) and name[:-3] in old_columns


def _subsequence(old: list[Any], new: list[Any], path: str) -> list[Any]:
    """The items of ``new`` not matched by ``old`` in order (``old`` must be a subsequence of ``new``)."""
    old = [o for o in old if not (isinstance(o, str) and _NO_INTERVALS in o)]  # since given intervals
    extra, i = [], 0
    for item in new:
        if i < len(old) and item == old[i]:
            i += 1
        else:
            extra.append(item)
    if i != len(old):
        raise AssertionError(f"{path}: a stored item is missing or changed: {old[i]!r}")
    return extra


def _about_intervals(text: str) -> bool:
    return any(w in text for w in _NOTE_WORDS)


def merge(old: Any, new: Any, path: str = "") -> Any:
    """The amended value: ``old`` with the additions the module docstring allows taken from ``new`` (raises
    AssertionError on any other difference). Stored values are kept as stored: floats equal up to the goldens'
    :func:`capture.float_same` tolerance, entries marked ``not_golden``, and refusals (whose wording is not golden,
    :func:`capture.compare_release`)."""
    if isinstance(old, dict) and old.get("not_golden"):
        return old
    if isinstance(old, dict) and old.get("refused"):
        if not (isinstance(new, dict) and new.get("refused")):
            raise AssertionError(f"{path}: refused at capture, now {new!r}"[:300])
        return old
    if isinstance(old, dict) and isinstance(new, dict):
        if set(old) >= {"columns", "values"}:  # a table
            cols = old["columns"]
            kept = [c for c in new["columns"] if c in cols]
            added = [c for c in new["columns"] if c not in cols]
            if kept != cols or not all(_added_column(c, cols) for c in added):
                raise AssertionError(f"{path}.columns: {cols} -> {new['columns']}")
            out: dict[str, Any] = {}
            for key in new:
                if key not in old:
                    raise AssertionError(f"{path}: key added {key}")
                if key == "columns":
                    out[key] = new[key]
                elif isinstance(old[key], dict) and set(old[key]) <= set(new[key]):
                    extra = set(new[key]) - set(old[key])
                    if not all(_added_column(c, cols) for c in extra):
                        raise AssertionError(f"{path}.{key}: unexpected {sorted(extra)}")
                    out[key] = {c: merge(old[key][c], new[key][c], f"{path}.{key}.{c}") if c in old[key]
                                else new[key][c] for c in new[key]}
                elif isinstance(old[key], list) and isinstance(new[key], list) and len(old[key]) == len(cols):
                    by_name = dict(zip(new["columns"], new[key]))
                    olds = dict(zip(cols, old[key]))
                    out[key] = [merge(olds[c], by_name[c], f"{path}.{key}.{c}") if c in olds else by_name[c]
                                for c in new["columns"]]
                else:
                    out[key] = merge(old[key], new[key], f"{path}.{key}")
            return out
        missing = set(old) - set(new)
        if missing:
            raise AssertionError(f"{path}: keys removed {sorted(missing)}")
        extra = set(new) - set(old)
        if extra and not all(_added_column(str(k), [str(c) for c in old]) for k in extra):
            raise AssertionError(f"{path}: keys added {sorted(extra)}")
        return {k: merge(old[k], new[k], f"{path}.{k}") if k in old else new[k] for k in new}
    if isinstance(old, list) and isinstance(new, list):
        if path.endswith("notes"):
            extra = _subsequence(old, new, path)
            if not all(isinstance(n, str) and _about_intervals(n) for n in extra):
                raise AssertionError(f"{path}: added notes not about intervals: {extra}")
            return new
        if len(old) != len(new):
            raise AssertionError(f"{path}: length {len(old)} -> {len(new)}")
        return [merge(a, b, f"{path}[{i}]") for i, (a, b) in enumerate(zip(old, new))]
    if isinstance(old, str) and isinstance(new, str) and old != new:
        if path.endswith(".table.sha256"):
            return new  # the written file's content hash: the file now holds the interval columns too
        try:
            o, n = json.loads(old), json.loads(new)
        except (ValueError, TypeError):
            pass
        else:
            merge(o, n, f"{path}<json>")  # checked; the text is the new one (its producer's formatting)
            return new
        if "\n" in old or "\n" in new:  # a printed report: its added lines are notes about intervals
            extra = _subsequence(old.splitlines(), new.splitlines(), path)
            if not all(_about_intervals(x) or x.startswith(" " * 16) for x in extra):
                raise AssertionError(f"{path}: added lines not about intervals: {extra}")
            return new
        raise AssertionError(f"{path}: {old!r} -> {new!r}")
    if ".count_hi[" in path and isinstance(old, (int, float)) and old < 0 and new == 0:
        return new  # a count interval's upper end is now clamped to the counts' range [0, ∞) like its lower end
    if isinstance(old, float) and isinstance(new, float):
        if not capture.float_same(new, old):
            raise AssertionError(f"{path}: {old!r} -> {new!r}")
        return old
    if type(old) is not type(new) or old != new:
        raise AssertionError(f"{path}: {old!r} -> {new!r}")
    return old


def _write(path: Path, data: dict, indent: int | None = 0, ensure_ascii: bool = False) -> None:
    path.write_text(json.dumps(data, indent=indent, ensure_ascii=ensure_ascii) + "\n")


def embedded(tmp: Path) -> None:
    import polars  # noqa: F401  (capture's data)

    old = json.loads(capture.RELEASE_FILE.read_text())
    cached = tmp.parent / "amend_embedded_new.json"
    if "--cached" in sys.argv and cached.exists():  # the recomputation of a run whose check stopped
        new = merge({k: v for k, v in old.items() if k != "amended"}, json.loads(cached.read_text()), "releases")
        new["amended"] = NOTE
        _write(capture.RELEASE_FILE, new)
        print(f"checked and wrote {capture.RELEASE_FILE.name}")
        return
    df = capture.log()
    parquet = str(tmp / "log.parquet")
    df.write_parquet(parquet)
    new = {"captured_at": old["captured_at"], "versions": old["versions"],
           "releases": {e: {n: capture.log_release(n, *capture.engine_input(e, df, parquet))
                            for n in capture._log_cases()} for e in capture.EMBEDDED},
           "other_releases": {n: capture.other_release(n) for n in capture._other_cases()},
           "vectors": capture.vectors_golden(), "alp": capture.alp_golden(), "sketches": capture.sketches_golden(),
           "release_histogram": capture.histogram_golden(), "cli": capture.cli_golden(tmp)}
    _write(tmp.parent / "amend_embedded_new.json", new)  # kept if the check below stops
    new = merge({k: v for k, v in old.items() if k != "amended"}, new, "releases")
    new["amended"] = NOTE
    _write(capture.RELEASE_FILE, new)
    print(f"checked and wrote {capture.RELEASE_FILE.name}")


def spark(tmp: Path) -> None:
    old = json.loads(capture.SPARK_FILE.read_text())
    cached = tmp.parent / "amend_spark_new.json"
    if "--cached" in sys.argv and cached.exists():
        new = merge({k: v for k, v in old.items() if k != "amended"}, json.loads(cached.read_text()), "spark")
        new["amended"] = NOTE
        _write(capture.SPARK_FILE, new)
        print(f"checked and wrote {capture.SPARK_FILE.name}")
        return
    session = capture.spark_session(tmp)
    try:
        new = {"captured_at": old["captured_at"], "versions": old["versions"],
               "releases": capture.spark_releases(session)}
    finally:
        session.stop()
    _write(tmp.parent / "amend_spark_new.json", new)  # kept if the check below stops
    new = merge({k: v for k, v in old.items() if k != "amended"}, new, "spark")
    new["amended"] = NOTE
    _write(capture.SPARK_FILE, new)
    print(f"checked and wrote {capture.SPARK_FILE.name}")


def tables() -> None:
    rt = _load("golden_release_tables", HERE / "test_release_tables_golden.py")
    old = json.loads(rt.GOLDEN.read_text())
    df = rt._data()
    new = {"polars": old["polars"], "tables": {n: rt._release(n, df, "polars") for n in rt.CASES},
           "histograms": {n: rt._histogram(n, df) for n in rt.HIST_CASES}}
    for name, table in old["tables"].items():  # a table here is {column: values}
        got = new["tables"][name]
        merged = merge({"columns": list(table), "values": table}, {"columns": list(got), "values": got},
                       f"tables.{name}")
        new["tables"][name] = merged["values"]
    new["histograms"] = merge(old["histograms"], new["histograms"], "histograms")
    new["amended"] = NOTE
    _write(rt.GOLDEN, new, ensure_ascii=True)
    print(f"checked and wrote {rt.GOLDEN.name}")


if __name__ == "__main__":
    parts = set(sys.argv[1:]) or {"embedded", "spark", "tables"}
    with tempfile.TemporaryDirectory() as d:
        if "tables" in parts:
            tables()
        if "embedded" in parts:
            embedded(Path(d))
        if "spark" in parts:
            spark(Path(d))
