"""A cache of calibrations: :func:`cached_calibrate` is :func:`sparsedp.accounting.calibrate` with its results
kept within the process and on disk (issue 31, start-up).

A calibration is a pure function of its arguments (mechanism, ε, δ, l0 / k / top_k / d and the mechanism's
options): no data, no randomness. So a release can reuse one computed earlier, in this process or in an earlier
one, instead of evaluating the accountant again (the discrete GSHM and Laplace searches, and importing
:mod:`scipy.special` for them: 0.3–0.5 s of a fresh process, more than the rest of a small release).

**Never a different number.** An entry is written only if decoding it gives back a calibration whose ``repr``
(every float to the last bit, Fractions exact, enums, the δ parts) is that of the one just computed; it is read
only if its stored key is the exact key asked for and its checksum matches. Anything else — a truncated or
garbled file, another format, a law this version does not know — is ignored and the calibration computed
afresh (and the file rewritten). The key holds the sparsedp version and a stamp of the accountants' source files
(names, sizes, modification times of ``sparsedp/accounting/*.py``), so an edited accountant never reads a
calibration of the old code. Only calibrations whose arguments are plain numbers, strings, booleans or None
and whose result is a :class:`~.calibration.Calibration` carrying a :mod:`.laws` law are cached.

**Where.** In memory (a dict per process), and one small JSON file per calibration under the user's cache
directory (``platformdirs.user_cache_dir("sparsedp")`` when platformdirs is installed, else
``$XDG_CACHE_HOME/sparsedp`` or ``~/.cache/sparsedp``), sub-directory ``calibrations``. The environment variable
``SPARSEDP_CACHE_DIR`` names another directory; set to an empty string it turns the disk cache off. Files are
written atomically (temporary file, then rename); a directory that cannot be written is no error.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from dataclasses import fields
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Callable, TypeVar

from .. import __version__
from .calibration import Calibration
from .laws import LAWS
from ..core.lazy import lazy_module

if TYPE_CHECKING:
    import sparsedp.accounting.calibrate as _calibrate  # (the package attribute "calibrate" is the function)
else:  # the accountants: imported on a cache miss only (issue 31)
    _calibrate = lazy_module(f"{__package__}.calibrate")

__all__ = ["cached_calibrate", "cached_value", "cache_dir", "clear_memory", "decode_value", "encode_value", "entry_key",
           "load_body", "store_body"]

_T = TypeVar("_T")

_FORMAT = 1
_MEMORY: dict[str, Calibration] = {}
_STAMP: list[str] = []


def clear_memory() -> None:
    """Forget the calibrations kept in this process (the disk cache stays)."""
    _MEMORY.clear()


def cache_dir() -> str | None:
    """The directory of the disk cache, or ``None`` when it is turned off (``SPARSEDP_CACHE_DIR=""``)."""
    env = os.environ.get("SPARSEDP_CACHE_DIR")
    if env is not None:
        return os.path.join(env, "calibrations") if env else None
    try:
        from platformdirs import user_cache_dir

        base = user_cache_dir("sparsedp")
    except ImportError:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
                            "sparsedp")
    return os.path.join(base, "calibrations")


def _stamp() -> str:
    """The sparsedp version and the accountants' source files (name, size, mtime), hashed; once per process."""
    if not _STAMP:
        here = os.path.dirname(os.path.abspath(__file__))
        h = hashlib.sha256(__version__.encode())
        for name in sorted(os.listdir(here)):
            if name.endswith(".py"):
                st = os.stat(os.path.join(here, name))
                h.update(f"{name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        _STAMP.append(h.hexdigest())
    return _STAMP[0]


def _key(mechanism: str, kwargs: dict[str, Any]) -> str | None:
    """The exact key of a calibration request (floats by their hex form), or ``None`` when an argument is not a
    plain value (then the request is not cached)."""
    items: list[list[Any]] = []
    for name in sorted(kwargs):
        x = kwargs[name]
        if isinstance(x, bool) or x is None or isinstance(x, str):
            items.append([name, x])
        elif isinstance(x, int):
            items.append([name, {"i": str(x)}])
        elif isinstance(x, float):
            items.append([name, {"f": x.hex()}])
        else:
            return None
    if not isinstance(mechanism, str):
        return None
    return json.dumps([_FORMAT, _stamp(), mechanism, items], separators=(",", ":"))


def encode_value(x: Any) -> Any:
    """A value of a calibration or law field as tagged JSON (exact: floats as hex, Fractions as integers)."""
    if x is None or isinstance(x, bool):
        return x
    if isinstance(x, int):
        return {"i": str(x)}
    if isinstance(x, float):
        return {"f": x.hex()}
    if isinstance(x, Fraction):
        return {"q": [str(x.numerator), str(x.denominator)]}
    if isinstance(x, str):  # also the str enums Comparison / Neighbours (their value)
        return {"s": str(x.value) if hasattr(x, "value") else x}
    raise TypeError(f"not cacheable: {type(x).__name__}")


def decode_value(x: Any) -> Any:
    """The value :func:`encode_value` wrote (``ValueError`` on anything else: a damaged entry is recomputed)."""
    if x is None or isinstance(x, bool):
        return x
    if not isinstance(x, dict) or len(x) != 1:
        raise ValueError("bad value")
    (tag, v), = x.items()
    if tag == "i" and isinstance(v, str):
        return int(v)
    if tag == "f" and isinstance(v, str):
        return float.fromhex(v)
    if tag == "q" and isinstance(v, list) and len(v) == 2:
        return Fraction(int(v[0]), int(v[1]))
    if tag == "s" and isinstance(v, str):
        return v
    raise ValueError("bad value")


def _encode(cal: Calibration) -> dict[str, Any]:
    if type(cal) is not Calibration or not isinstance(cal.noise, LAWS):
        raise TypeError("not cacheable")
    out: dict[str, Any] = {}
    for f in fields(cal):
        x = getattr(cal, f.name)
        if f.name == "noise":
            out["noise"] = {"law": type(x).__name__,
                            "fields": {g.name: encode_value(getattr(x, g.name)) for g in fields(x)}}
        elif f.name == "delta_parts":
            out["delta_parts"] = [[k, encode_value(v)] for k, v in x.items()]
        else:
            out[f.name] = encode_value(x)
    return out


def _decode(d: Any) -> Calibration:  # d: parsed JSON, checked field by field here
    if not isinstance(d, dict):
        raise ValueError("bad entry")
    names = [f.name for f in fields(Calibration)]
    if sorted(d) != sorted(names):
        raise ValueError("bad entry")
    law = {cls.__name__: cls for cls in LAWS}[d["noise"]["law"]]
    law_fields = d["noise"]["fields"]
    if not isinstance(law_fields, dict) or sorted(law_fields) != sorted(g.name for g in fields(law)):
        raise ValueError("bad law")
    kw: dict[str, Any] = {}
    for name in names:
        if name == "noise":
            kw[name] = law(**{k: decode_value(v) for k, v in law_fields.items()})
        elif name == "delta_parts":
            kw[name] = {str(k): decode_value(v) for k, v in d[name]}
        else:
            kw[name] = decode_value(d[name])
    return Calibration(**kw)


def _path(key: str) -> str | None:
    d = cache_dir()
    return None if d is None else os.path.join(d, hashlib.sha256(key.encode()).hexdigest()[:40] + ".json")


def _checksum(key: str, body: Any) -> str:
    return hashlib.sha256((key + "\0" + json.dumps(body, sort_keys=True)).encode()).hexdigest()


def entry_key(kind: str, kwargs: dict[str, Any]) -> str | None:
    """The exact key of a cached entry of ``kind`` (another kind of calibration, e.g. the adaptive-weighting
    rounds, :mod:`.rounds_cache`) with the arguments ``kwargs`` (plain values only, else ``None``): the same key
    as a :func:`cached_calibrate` request, with this format, the sparsedp version and the accountants' stamp."""
    return _key(kind, kwargs)


def load_body(key: str) -> Any | None:  # parsed JSON: the caller decodes and checks it
    """The stored body for ``key`` (parsed JSON), or ``None`` when the file is missing, unreadable, not JSON,
    for another key or fails its checksum."""
    path = _path(key)
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            entry = json.load(fh)
        if entry["key"] != key or entry["sha256"] != _checksum(key, entry["calibration"]):
            return None
        return entry["calibration"]
    except Exception:  # any damage to the file means: compute afresh
        return None


def store_body(key: str, body: Any) -> None:  # body: JSON-able, already checked by the caller
    """Store ``body`` under ``key`` with its checksum: a temporary file, then an atomic rename; a directory that
    cannot be written is no error (nothing is stored)."""
    path = _path(key)
    if path is None:
        return
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"key": key, "sha256": _checksum(key, body), "calibration": body}, fh)
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:
        return


def _read(key: str) -> Calibration | None:
    """The calibration stored for ``key``, or ``None`` (missing, unreadable, another key, corrupted)."""
    body = load_body(key)
    if body is None:
        return None
    try:
        return _decode(body)
    except Exception:  # any damage to the file means: compute afresh
        return None


def cached_value(key: str | None, memory: dict[str, _T], compute: Callable[[], _T],
                 encode: Callable[[_T], Any], decode: Callable[[Any], _T]) -> _T:
    """The one flow of every cached calibration: ``memory[key]``, else the disk entry for ``key`` if ``decode``
    accepts it (any exception: ignored, computed afresh), else ``compute()``, kept in ``memory`` and stored on disk
    only if ``decode(encode(value))`` gives it back to the last bit (``repr``). A value ``encode`` cannot write
    (``TypeError``/``ValueError``) is returned uncached; ``key`` ``None`` (arguments with no exact key): computed
    every time. Errors of ``compute`` propagate and nothing is cached."""
    if key is not None:
        hit = memory.get(key)
        if hit is None:
            body = load_body(key)
            if body is not None:
                try:
                    hit = decode(body)
                except Exception:  # a damaged or altered entry: computed afresh below
                    hit = None
        if hit is not None:
            memory[key] = hit
            return hit
    value = compute()
    if key is not None:
        try:
            body = encode(value)
            back = decode(json.loads(json.dumps(body)))
        except (TypeError, ValueError):
            return value
        memory[key] = value
        if repr(back) == repr(value):
            store_body(key, body)
    return value


def cached_calibrate(mechanism: str, **kwargs: Any) -> Calibration:  # kwargs: calibrate's, passed on
    """:func:`sparsedp.accounting.calibrate` ``(mechanism, **kwargs)``, from the cache when it holds this exact
    request (module docstring), else computed and stored. Errors (infeasible or invalid requests) are raised
    as by ``calibrate`` and never cached."""
    return cached_value(_key(mechanism, kwargs), _MEMORY, lambda: _calibrate.calibrate(mechanism, **kwargs),
                        _encode, _decode)
