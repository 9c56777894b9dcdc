"""``core.lazy``: a module read through :func:`lazy_module` is imported on its first attribute read, every read
returns the module's own attribute (so a monkeypatched function is the one called), :func:`imported` says
whether it is imported yet, and the stand-in is read-only. ``sparsedp.accounting`` loads its exported names on
first use and keeps the function ``calibrate`` over its submodule of that name (issue 31, start-up)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

from sparsedp.core.lazy import LazyModule, imported, lazy_module

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "src"))


def _fresh(code: str) -> list[str]:
    env = dict(os.environ, PYTHONPATH=SRC + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    return out.stdout.split()


def test_first_read_imports_the_module_in_a_fresh_process():
    code = ("import sys\nfrom sparsedp.core.lazy import lazy_module, imported\n"
            "m = lazy_module('sparsedp.accounting.set_union')\n"
            "print(imported(m), 'sparsedp.accounting.set_union' in sys.modules)\n"
            "f = m.weighted_gaussian_delta\n"
            "import sparsedp.accounting.set_union as real\n"
            "print(imported(m), f is real.weighted_gaussian_delta)\n")
    assert _fresh(code) == ["False", "False", "True", "True"]


def test_reads_follow_the_module(monkeypatch):
    import sparsedp.accounting.split as real

    m = lazy_module("sparsedp.accounting.split")
    assert m.split_epsilon is real.split_epsilon
    monkeypatch.setattr(real, "split_epsilon", lambda *a: "patched")
    assert m.split_epsilon() == "patched"
    assert imported(m) and imported(real)
    with pytest.raises(AttributeError):
        m.no_such_name
    with pytest.raises(AttributeError):
        m.__wrapped__  # probes of dunder names are not forwarded
    with pytest.raises(AttributeError, match="read-only"):
        m.split_epsilon = None
    assert isinstance(m, LazyModule) and "sparsedp.accounting.split" in repr(m)
    back = pickle.loads(pickle.dumps(m))
    assert isinstance(back, LazyModule) and back.split_epsilon is real.split_epsilon


def test_accounting_names_load_on_first_use_and_calibrate_stays_the_function():
    code = ("import sys, types\nimport sparsedp.accounting as a\n"
            "print('sparsedp.accounting.gshm' in sys.modules)\n"
            "import sparsedp.accounting.calibrate\n"  # the submodule first: the package keeps the function
            "from sparsedp.accounting import calibrate\n"
            "print(isinstance(a.calibrate, types.FunctionType), calibrate is a.calibrate)\n"
            "print(a.gshm_tau is sys.modules['sparsedp.accounting.gshm'].gshm_tau, 'gshm_tau' in dir(a))\n"
            "print(sorted(a.__all__) == sorted(a._API))\n")  # the literal list (mypy's) and the lazy table agree
    assert _fresh(code) == ["False", "True", "True", "True", "True", "True"]


def test_the_api_import_pauses_the_collector_and_leaves_it_as_it_was():
    """``sparsedp.release`` (the package's lazy API) imports its module with the cyclic garbage collector paused
    (no collection runs during that import) and leaves the collector on, or off, as it found it."""
    code = ("import gc\n"
            "runs = []\n"
            "gc.callbacks.append(lambda phase, info: runs.append(phase))\n"
            "import sparsedp as sd\n"
            "gc.collect(); runs.clear()\n"
            "sd.release\n"
            "print(len(runs), gc.isenabled())\n"
            "gc.disable()\n"
            "sd.Ledger\n"
            "print(gc.isenabled())\n")
    assert _fresh(code) == ["0", "True", "False"]
