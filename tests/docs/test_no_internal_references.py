"""No project-internal reference in what users read (issue 30 item 10): the docs, the README, and the strings
and docstrings of the package (help, reports, error messages, the API reference) cite papers by authors and year
(the bibliography page gives titles and arXiv ids), never the project's private notes ("seed 000 §4", "seed
papers", ``shared/specs/…``)."""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
FORBIDDEN = re.compile(r"\bseed[ -]?0\d\d|\bseed papers?\b|shared/specs|shared/seeds|\.\./shared/", re.IGNORECASE)


def _strings(path: pathlib.Path):
    """Every string constant of a module (docstrings, messages, help texts) with its line."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            yield node.lineno, node.value


def test_package_strings_cite_papers_not_internal_notes():
    bad = [f"{p.relative_to(ROOT)}:{line}: {FORBIDDEN.search(s).group(0)!r}"
           for p in sorted((ROOT / "src").rglob("*.py")) for line, s in _strings(p) if FORBIDDEN.search(s)]
    assert bad == [], "\n".join(bad)


def test_docs_cite_papers_not_internal_notes():
    files = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md", ROOT / "mkdocs.yml"]
    bad = [f"{p.relative_to(ROOT)}:{i}: {m.group(0)!r}" for p in files
           for i, line in enumerate(p.read_text().splitlines(), 1) for m in [FORBIDDEN.search(line)] if m]
    assert bad == [], "\n".join(bad)


def test_the_bibliography_lists_every_cited_paper_with_its_arxiv_id():
    bib = (ROOT / "docs" / "bibliography.md").read_text()
    for cite, arxiv in (("Lebeda & Retschmeier (2024)", "2412.10357"), ("Karrer et al. (2022)", "2202.01100"),
                        ("Lebeda (2024)", "2408.06853"), ("Balcer & Vadhan (2019)", "1709.05396"),
                        ("Lebeda (2023)", None)):
        assert cite in bib and (arxiv is None or f"arXiv:{arxiv}" in bib), cite
