"""The registry imports only the modules of the default release's mechanisms until another name is asked for
(issue 19, start-up cost): the result of every registry call is unchanged (same classes, same registration
order, same ``auto`` candidates), each checked in a fresh process, where the registry starts empty."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "src"))
_NON_CORE = ("sparsedp.mechanisms.pure", "sparsedp.mechanisms.misra_gries", "sparsedp.mechanisms.public_keys",
             "sparsedp.mechanisms.grouped_keys", "sparsedp.mechanisms.two_stage", "sparsedp.mechanisms.set_union",
             "sparsedp.mechanisms.elliptical", "sparsedp.mechanisms.mean")


def _fresh(code: str):
    env = dict(os.environ)
    env["PYTHONPATH"] = _SRC + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", "import json, sys\nfrom sparsedp.mechanisms import registry as r\n"
                          + code], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _loaded():
    return f"[m for m in {_NON_CORE!r} if m in sys.modules]"


def test_auto_candidates_need_only_the_core_modules():
    core = _fresh(f"c = [k.name for k in r.auto_candidates()]\nprint(json.dumps([c, {_loaded()}]))")
    full = _fresh("r._load()\nprint(json.dumps([k.name for k in r.auto_candidates()]))")
    assert core[0] == full and full  # every built-in candidate is registered by _BUILTIN[:_CORE]
    assert core[1] == []


def test_names_keep_the_registration_order_whatever_is_asked_first():
    full = _fresh("print(json.dumps(r.names()))")
    for first in ("gshm", "auto", "laplace", "topk-csh", "misra-gries", "pure-sparse", "set-union-nonexistent"):
        names = _fresh(f"try:\n    r.get({first!r})\nexcept Exception:\n    pass\nprint(json.dumps(r.names()))")
        assert names == full, first
    assert set(full[:4]) == {"gshm", "laplace", "topk-csh", "auto"} and {"misra-gries", "pure-sparse"} <= set(full)
    # a module imported directly (a test's or the audit's top-level import) registers early; the order holds
    for module in ("adaptive_weighting", "partition_selection", "set_union"):
        names = _fresh(f"import sparsedp.mechanisms.{module}\nprint(json.dumps(r.names()))")
        assert names == full, module


@pytest.mark.parametrize("name", ["gshm", "auto", "misra-gries", "pure-sparse", "weighted-gaussian", "two-stage"])
def test_get_finds_every_builtin_from_a_fresh_registry(name):
    got = _fresh(f"c = r.get({name!r})\nprint(json.dumps([c.name, c.__module__, {_loaded()}]))")
    assert got[0] == name and got[1].startswith("sparsedp.mechanisms.")
    if name in ("gshm", "auto"):
        assert got[2] == []  # the default release's mechanisms load no other mechanism module


def test_unknown_name_lists_every_mechanism():
    msg = _fresh("try:\n    r.get('nope')\nexcept Exception as e:\n    print(json.dumps(str(e)))")
    assert "'misra-gries'" in msg and "'gshm'" in msg and "'pure-sparse'" in msg
