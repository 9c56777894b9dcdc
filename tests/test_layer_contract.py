"""The layer contract of ``docs/architecture.md`` ("Layers"), checked on the source: every import between sparsedp's
own modules, at module top, inside functions and under ``if TYPE_CHECKING:`` alike, goes down the layer list (or
stays inside its layer), and mechanisms and engines never import each other.

The check reads the code (``ast``), it does not import it, so an import hidden in a function or behind
``TYPE_CHECKING`` counts the same as one at the top. Lazy loading through ``importlib`` tables (the engine and
mechanism registries, ``sparsedp/__init__``) is not an import statement and is the one sanctioned way to keep
``import sparsedp`` and a default release light.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

import pytest

# the source is parsed once, when the first of these tests runs (not at collection, in every xdist worker):
# one worker runs them all
pytestmark = pytest.mark.xdist_group("layer-contract")


SRC = Path(__file__).resolve().parents[1] / "src" / "sparsedp"

#: bottom to top; a module may import its own layer and the layers below it, never a layer above
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("core", frozenset({"core", "errors", "_validate", "progress", "aggregates"})),
    ("accounting", frozenset({"accounting"})),
    ("noise", frozenset({"noise"})),
    ("sketches", frozenset({"sketches"})),
    ("mechanisms | engines", frozenset({"mechanisms", "engines"})),
    ("pipeline", frozenset({"request", "execution", "query", "pipeline", "bound_choice", "auto_bound", "auto_keys",
                            "vectors", "alp_release", "ledger", "report", "advice", "demo_data",
                            "quantile_release", "other_row"})),
    ("front ends", frozenset({"cli", "audit", "reproduce", "plotting", "__main__"})),
)
#: packages of one layer that must not import each other (they meet in ``core``'s engine protocol)
APART = (frozenset({"mechanisms"}), frozenset({"engines"}))
#: the root package ``sparsedp/__init__`` is the public façade (it loads everything lazily): nothing imports it
#: except for its version string
ROOT_NAMES_ALLOWED = frozenset({"__version__"})

#: known upward imports that other work of issue 29 removes, with who removes them. Entries are removed as that
#: work lands (:func:`test_no_pending_exception_is_stale` fails on an entry that no longer occurs).
PENDING: dict[tuple[str, str], str] = {
}

#: in-function imports of sparsedp's own modules allowed in all of src/ (issue 29's target)
MAX_IN_FUNCTION = 25


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, e.g. "sparsedp.mechanisms.set_union"
    target: str  # the imported module, e.g. "sparsedp.engines.base" ("sparsedp" for the root package)
    names: tuple[str, ...]  # the names imported from ``target`` (empty for ``import x``)
    line: int
    kind: str  # "top", "function" or "type-checking"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@functools.cache
def _imports() -> list[Import]:
    out: list[Import] = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_function: set[int] = set()
        for f in ast.walk(tree):
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                in_function.update(id(n) for n in ast.walk(f))
        type_checking: set[int] = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
                type_checking.update(id(m) for m in ast.walk(n))
        for n in ast.walk(tree):
            kind = "type-checking" if id(n) in type_checking else "function" if id(n) in in_function else "top"
            if isinstance(n, ast.ImportFrom):
                base = _resolve(module, n, path.name == "__init__.py")
                if base != "sparsedp" and not base.startswith("sparsedp."):
                    continue
                # ``from pkg import submodule`` imports the submodule; other names come from ``base`` itself
                subs = [a.name for a in n.names if f"{base}.{a.name}" in MODULES]
                rest = tuple(a.name for a in n.names if f"{base}.{a.name}" not in MODULES)
                out += [Import(module, f"{base}.{s}", (), n.lineno, kind) for s in subs]
                if rest:
                    out.append(Import(module, base, rest, n.lineno, kind))
            elif isinstance(n, ast.Import):
                out += [Import(module, a.name, (), n.lineno, kind) for a in n.names
                        if a.name == "sparsedp" or a.name.startswith("sparsedp.")]
    return out


def _package(module: str) -> str:
    """The top-level part below ``sparsedp`` ("" for the root package)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(package: str) -> int:
    for i, (_, members) in enumerate(LAYERS):
        if package in members:
            return i
    raise KeyError(package)


def _violation(imp: Import) -> str | None:
    src, dst = _package(imp.module), _package(imp.target)
    if src == dst:
        return None
    if dst == "":
        if set(imp.names) <= ROOT_NAMES_ALLOWED:
            return None
        return "imports the root package (the public façade); import the module that defines the name"
    if src == "":
        return None  # the façade may import anything
    ls, ld = _layer(src), _layer(dst)
    if ld > ls:
        return f"{LAYERS[ls][0]} imports the higher layer {LAYERS[ld][0]}"
    for a in APART:
        if src in a and dst not in a and dst in LAYERS[ls][1]:
            return f"{src} and {dst} never import each other (they meet in core's engine protocol)"
    return None


def _pending(imp: Import) -> bool:
    return any(imp.module == m and (imp.target == t or imp.target.startswith(t + ".")) for m, t in PENDING)


def test_every_module_has_a_layer():
    """A new top-level module or package must be placed in the layer list (here and in docs/architecture.md)."""
    unplaced = sorted({_package(m) for m in MODULES if _package(m)} - set().union(*(m for _, m in LAYERS)))
    assert not unplaced, f"modules without a layer: {unplaced}"


def test_no_import_goes_up_a_layer_or_across_mechanisms_and_engines():
    bad = [f"{i.module}:{i.line} ({i.kind}) imports {i.target}: {why}"
           for i in _imports() if (why := _violation(i)) is not None and not _pending(i)]
    assert not bad, "imports against the layer contract (docs/architecture.md, Layers):\n" + "\n".join(bad)


def test_no_pending_exception_is_stale():
    """Each tolerated upward import still occurs: remove an entry of :data:`PENDING` once its work has landed."""
    stale = [k for k in PENDING
             if not any(i.module == k[0] and (i.target == k[1] or i.target.startswith(k[1] + "."))
                        and _violation(i) is not None for i in _imports())]
    assert not stale, f"PENDING entries that no longer occur (remove them): {stale}"


def test_the_contract_sees_hidden_imports():
    """The checker counts imports inside functions and under TYPE_CHECKING, and flags each kind of breach."""
    kinds = {i.kind for i in _imports()}
    assert {"top", "function"} <= kinds
    up = Import("sparsedp.mechanisms.x", "sparsedp.pipeline", ("release",), 1, "type-checking")
    across = Import("sparsedp.engines.x", "sparsedp.mechanisms.kernel", ("f",), 1, "function")
    root = Import("sparsedp.noise.x", "sparsedp", ("release",), 1, "top")
    down = Import("sparsedp.mechanisms.x", "sparsedp.core.engine", ("Engine",), 1, "top")
    version = Import("sparsedp.cli", "sparsedp", ("__version__",), 1, "top")
    assert _violation(up) and _violation(across) and _violation(root)
    assert _violation(down) is None and _violation(version) is None


def test_mechanisms_and_engines_never_import_each_other():
    """The issue's acceptance line, stated on its own: no module of mechanisms/ imports engines/ or back."""
    bad = [f"{i.module}:{i.line} imports {i.target}" for i in _imports()
           if {_package(i.module), _package(i.target)} == {"mechanisms", "engines"}]
    assert not bad, "\n".join(bad)


def _in_function_count() -> int:
    return sum(1 for i in _imports() if i.kind == "function")


def test_few_imports_of_own_modules_inside_functions():
    """sparsedp's own imports sit at the top of each module; lazy imports are for heavy third-party libraries."""
    assert _in_function_count() <= MAX_IN_FUNCTION, f"{_in_function_count()} in-function imports of own modules"
