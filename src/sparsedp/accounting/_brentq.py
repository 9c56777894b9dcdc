"""Brent's root finder for the accountants without importing :mod:`scipy.optimize` (issue 19, fixed costs).

The default release calls one function of ``scipy.optimize``: ``brentq`` (Brent 1973, ch. 4), in
:func:`sparsedp.accounting.gaussian.gaussian_sigma`. Importing ``scipy.optimize`` costs 0.12–0.2 s of every
fresh process on the development machine (it imports ``scipy.linalg``, ``scipy.sparse``, the linear-programming
and global optimisers…), more than the whole calibration. ``scipy.optimize.brentq`` is a thin Python wrapper
(argument checks, a NaN check on every function value) around the compiled solver ``_brentq`` of the extension
module ``scipy.optimize._zeros``, which is self-contained C and imports nothing.

:func:`brentq` loads that extension from the installed scipy's directory without running
``scipy/optimize/__init__.py`` and calls it with the same arguments and the same NaN check as the wrapper, so
its roots are bit-identical to ``scipy.optimize.brentq`` (tested against it, on the accountants' own functions,
in ``tests/accounting/test_start_up_imports.py``). The extension is loaded once; before first use it must
solve a known equation exactly as documented, else (another scipy layout, a changed signature, no file) every
call goes to ``scipy.optimize.brentq`` itself. If ``scipy.optimize`` is already imported, its own module is
used. No privacy guarantee rests on the solver: every caller checks the root it gets in floating point and
nudges it conservatively.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Callable, TypeAlias

_XTOL_MIN = 0.0
_RTOL_MIN = 4 * 2.220446049250313e-16  # scipy.optimize.brentq refuses rtol below 4·eps
#: the compiled solver's signature: (f, a, b, xtol, rtol, maxiter, args, full_output, disp) -> root
_Solver: TypeAlias = Callable[[Callable[[float], float], float, float, float, float, int, tuple[()], bool, bool], float]
_solver: _Solver | None = None


def _load_compiled() -> _Solver | None:
    """``scipy.optimize._zeros._brentq`` without importing ``scipy.optimize``; ``None`` if unavailable or if
    it does not pass the self-check."""
    try:
        mod = sys.modules.get("scipy.optimize._zeros")
        if mod is None:
            import importlib.machinery
            import importlib.util

            import scipy  # scipy/__init__ is light: numpy and its own configuration only

            base = os.path.join(os.path.dirname(scipy.__file__), "optimize", "_zeros")
            path = next((base + s for s in importlib.machinery.EXTENSION_SUFFIXES if os.path.isfile(base + s)),
                        None)
            if path is None:
                return None
            spec = importlib.util.spec_from_file_location("scipy.optimize._zeros", path)
            if spec is None or spec.loader is None:
                return None
            mod = importlib.util.module_from_spec(spec)  # not put in sys.modules: scipy.optimize loads its own
            spec.loader.exec_module(mod)
        fn: _Solver = mod._brentq  # an untyped compiled function: typed here by its documented call
        # self-check: the documented call (f, a, b, xtol, rtol, maxiter, args, full_output, disp) on x − 0.5
        root = fn(lambda x: x - 0.5, 0.0, 1.0, 1e-15, _RTOL_MIN, 100, (), False, True)
        if not isinstance(root, float) or root != 0.5:
            return None
        return fn
    except Exception:  # noqa: BLE001 - any failure means: use the public function
        return None


def _public(f: Callable[[float], float], a: float, b: float, xtol: float, rtol: float, maxiter: int,
            args: tuple[()], full_output: bool, disp: bool) -> float:
    from scipy import optimize

    root: float = optimize.brentq(f, a, b, args=args, xtol=xtol, rtol=rtol, maxiter=maxiter,
                                  full_output=full_output, disp=disp)
    return root


def _get_solver() -> _Solver:
    global _solver
    if _solver is None:
        _solver = _load_compiled() or _public
    return _solver


def brentq(f: Callable[[float], float], a: float, b: float, *, xtol: float, rtol: float, maxiter: int) -> float:
    """A root of ``f`` in [a, b] (``f(a)``, ``f(b)`` of opposite signs): ``scipy.optimize.brentq(f, a, b,
    xtol=xtol, rtol=rtol, maxiter=maxiter)`` bit for bit, without importing ``scipy.optimize``.

    Raises ``ValueError`` as scipy does (bad tolerances, no sign change, a NaN function value) and
    ``RuntimeError`` if it does not converge within ``maxiter`` iterations.
    """
    if not xtol > _XTOL_MIN:
        raise ValueError(f"xtol too small ({xtol:g} <= 0)")
    if rtol < _RTOL_MIN:
        raise ValueError(f"rtol too small ({rtol:g} < {_RTOL_MIN:g})")

    def checked(x: float) -> float:  # scipy.optimize.brentq's NaN check (_wrap_nan_raise)
        fx = f(x)
        if math.isnan(fx):
            raise ValueError(f"The function value at x={x} is NaN; solver cannot continue.")
        return fx

    return _get_solver()(checked, a, b, xtol, rtol, int(maxiter), (), False, True)
