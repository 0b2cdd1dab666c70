"""Every decision the code, docs or reports cite by name ("decision A4 in docs/decisions/a2ha.md")
is a section of that decisions file, and the papers' published numbers load from the package."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CITATION = re.compile(r"\b[Dd]ecisions?\s+([A-Z][A-Z0-9.]*(?:-[A-Z0-9.]+)?)(?:,\s*[A-Z][A-Z0-9.]*)*"
                      r"\s+in\s+(?:\[?`?)(?:\.\./)*(?:docs/)?decisions/([\w-]+)\.md")
SOURCES = [p for p in (*(ROOT / "src").rglob("*.py"), *(ROOT / "src").rglob("*.toml"),
                       *(ROOT / "docs").rglob("*.md"), *(ROOT / "tests").rglob("*.py"))
           if "__pycache__" not in p.parts and p.name != "test_decisions.py"]


def _labels(doc: Path) -> set[str]:
    """The labels a decisions file defines: its section names, with ranges like W1-W4 expanded."""
    labels: set[str] = set()
    for m in re.finditer(r"^#+ ([A-Z][A-Z0-9.]*(?:-[A-Z0-9.]+)?)\b", doc.read_text(encoding="utf-8"), re.M):
        labels |= _expand(m.group(1))
    return labels


def _expand(label: str) -> set[str]:
    """A section name, or every label of a range section (W1-W4: W1, W2, W3, W4)."""
    if "-" not in label:
        return {label}
    lo, hi = label.split("-", 1)
    a, b = re.fullmatch(r"([A-Z]+)(\d+)", lo), re.fullmatch(r"([A-Z]+)?(\d+)", hi)
    if not (a and b) or (b.group(1) or a.group(1)) != a.group(1):
        return {lo, hi, label}
    return {f"{a.group(1)}{i}" for i in range(int(a.group(2)), int(b.group(2)) + 1)} | {label}


def _ends(label: str) -> set[str]:
    """What a cited label needs: itself, or for a cited range (B3.1-B4) its two ends."""
    if "-" not in label:
        return {label}
    lo, hi = label.split("-", 1)
    prefix = re.match(r"[A-Z]*", lo).group(0)  # type: ignore[union-attr]
    return {lo, hi if hi[:1].isalpha() else prefix + hi}


def _citations() -> list[tuple[str, str, str]]:
    out = []
    for path in SOURCES:
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in CITATION.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            out.append((f"{path.relative_to(ROOT)}:{line}", m.group(1), m.group(2)))
    return out


CITATIONS = _citations()


def test_the_decisions_are_cited():
    """The pattern finds the citations at all (a broken pattern would make the next test vacuous)."""
    docs = {doc for _, _, doc in CITATIONS}
    assert {"a2ha", "ilp", "thesis"} <= docs


@pytest.mark.parametrize(("where", "label", "doc"), CITATIONS, ids=[w for w, _, _ in CITATIONS])
def test_each_cited_decision_is_a_section_of_its_file(where: str, label: str, doc: str):
    path = ROOT / "docs" / "decisions" / f"{doc}.md"
    assert path.is_file(), f"{where} cites {path.relative_to(ROOT)}, which does not exist"
    missing = sorted(_ends(label) - _labels(path))
    assert not missing, f"{where} cites {label} of {path.name}, which has no section {missing}"


def test_the_papers_numbers_load_from_the_package():
    from skylease.experiments import a2ha_numbers, ilp_numbers
    from skylease.experiments.thesis import paper_mapping, paper_placement

    assert a2ha_numbers.PAPER_OPTIMUM == {"image": 18, "synthetic": 12, "outsystems": 29}
    assert a2ha_numbers.PAPER_TABLE2["serial"][2] is None  # the serial row prints no speedup
    labels = [p["claim"].split()[0] for p in ilp_numbers.WATERSHED]
    assert labels == ["R11", "R12", "R13", "R13", "R14", "R14"]
    assert paper_mapping.EXAMPLE_ETC.shape == (8, 4)
    assert len(paper_mapping.TABLE_3_8) == 16 and all(len(r) == 9 for r in paper_mapping.TABLE_3_8.values())
    assert paper_placement.EXAMPLE_WH == {"alg11": 1784.0, "alg12": 1100.0}
