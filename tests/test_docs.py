"""The design contract and the contributor pages stay true to the repository.

- Every `docs/design.md §N` cited in code, tests, templates or docs names a section that
  `docs/design.md` has (a heading `## §N.`), and nothing cites the old out-of-tree
  `DESIGN.md` any more.
- Every repository path that README.md or CONTRIBUTING.md names in backticks
  (`trainer/config.py`, `webapp/tracking/`, `trainer/checkpoint*.py`) exists.
- BENCHMARKS.md stays short (current results; the lab notebook is docs/benchmarks-log.md),
  every section it cites by its quoted title is a heading of the log, and every section of
  BENCHMARKS.md cited by its quoted title elsewhere is a heading of BENCHMARKS.md.
- README.md's Layout names every top-level folder, every Python package and the packages
  directly inside trainer/, webapp/, sandbox/ and workers/.

No network, no imports of the project: plain text over the working tree.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
# Folders that are not the project's own text: virtual environments, data, caches, builds.
SKIP_DIRS = {
    ".git",
    ".venv",
    ".data",
    "data",
    "node_modules",
    "__pycache__",
    ".pytest_cache",
    ".ruff_cache",
    "staticfiles",
    "artifacts",
    "runs",
}
TEXT_SUFFIXES = {".py", ".md", ".html", ".js"}
# May name the old DESIGN.md: the contract's history, and this file.
HISTORY = {Path("docs/contract-changes.md"), Path(__file__).resolve().relative_to(ROOT)}
CITATION = re.compile(r"docs/design\.md\s*§\s*(\d+)")
# A backticked span that is a relative repository path: a top-level folder, then segments,
# ending in a file name with an extension or in "/" (so `trainer/total_training_steps`, a
# metric name, is not taken for a path).
TOP_DIRS = ("trainer", "webapp", "workers", "sandbox", "tests", "bench", "docs", "scripts", ".ci")
_TOP = "|".join(re.escape(d) for d in TOP_DIRS)
REPO_PATH = re.compile(rf"^(?:{_TOP})(?:/[\w.*-]+)*(?:/[\w*-]+\.[\w.]+|/)$")
# Our Python packages: README's Layout names each one and each package directly inside it.
PACKAGES = ("trainer", "webapp", "sandbox", "workers")


def project_files() -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        found += [Path(folder, f) for f in files if Path(f).suffix in TEXT_SUFFIXES]
    return sorted(found)


def design_sections() -> set[int]:
    return {int(n) for n in re.findall(r"^## §(\d+)\.", DESIGN.read_text(), flags=re.M)}


def test_design_has_sections_one_to_eight():
    assert design_sections() == set(range(1, 9))


def test_every_cited_design_section_exists():
    sections = design_sections()
    missing, old = [], []
    for path in project_files():
        text = path.read_text(errors="replace")
        rel = path.relative_to(ROOT)
        for line_no, line in enumerate(text.splitlines(), 1):
            for n in CITATION.findall(line):
                if int(n) not in sections:
                    missing.append(f"{rel}:{line_no}: docs/design.md §{n}")
            # the old contract lived outside the repository; its history file may name it
            if "DESIGN.md" in line and rel not in HISTORY:
                old.append(f"{rel}:{line_no}: {line.strip()}")
    assert not missing, "cited sections that docs/design.md lacks:\n" + "\n".join(missing)
    assert not old, "cite docs/design.md instead of DESIGN.md:\n" + "\n".join(old)


def test_the_citation_pattern_is_used():
    # A guard on the test itself: if the pattern stopped matching, the test above would pass
    # vacuously.
    cited = [p for p in project_files() if CITATION.search(p.read_text(errors="replace"))]
    assert len(cited) >= 10


def backticked_paths(text: str) -> list[str]:
    paths = []
    for span in re.findall(r"`([^`\n]+)`", text):
        span = span.split(":")[0]  # `trainer/evaluate.py:held_out` names a function in a file
        if REPO_PATH.match(span):
            paths.append(span)
    return paths


def test_the_contributor_pages_name_only_paths_that_exist():
    wrong = []
    for page in ("README.md", "CONTRIBUTING.md"):
        for rel in backticked_paths((ROOT / page).read_text()):
            exists = any(ROOT.glob(rel.rstrip("/"))) if "*" in rel else (ROOT / rel).exists()
            if not exists:
                wrong.append(f"{page}: `{rel}`")
    assert not wrong, "paths that do not exist:\n" + "\n".join(wrong)


def test_backticked_paths_are_recognised():
    text = "see `trainer/config.py`, `webapp/tracking/`, `runs/x`, `a b/c`, `trainer/steps`"
    assert backticked_paths(text) == ["trainer/config.py", "webapp/tracking/"]
    assert backticked_paths("`trainer/evaluate.py:held_out`") == ["trainer/evaluate.py"]
    assert backticked_paths("`trainer/workflows/<name>.py` `/api/v1/runs`") == []


def layout_names() -> set[str]:
    """The folders README.md's Layout names (`trainer/`, `scripts/` of `scripts/run.py`)."""
    text = (ROOT / "README.md").read_text()
    layout = text.split("## Layout", 1)[1].split("```")[1]
    return set(re.findall(r"(?:^|\s)([\w.-]+/)", layout))


def test_the_readme_layout_names_every_top_level_folder():
    # Only folders git keeps: the suite itself leaves ignored ones (screenshots in
    # artifacts/, staticfiles/, the broker's control/); hidden folders are tools' (.git,
    # .venv, caches), and .ci is named all the same.
    ignored = subprocess.run(
        ["git", "check-ignore", *(p.name for p in ROOT.iterdir())],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()
    folders = [
        p.name
        for p in sorted(ROOT.iterdir())
        if p.is_dir()
        and not p.name.startswith(".")
        and p.name not in SKIP_DIRS
        and p.name not in ignored
    ]
    missing = [f for f in folders if f"{f}/" not in layout_names()]
    assert not missing, "README's Layout leaves out: " + ", ".join(missing)


def test_the_readme_layout_names_every_package():
    named = layout_names()
    missing = []
    for init in sorted(ROOT.glob("*/__init__.py")) + sorted(ROOT.glob("*/*/__init__.py")):
        package = init.parent
        if package.name in SKIP_DIRS or not os.access(init, os.R_OK):
            continue
        if package.parent == ROOT or package.parent.name in PACKAGES:
            if f"{package.name}/" not in named:
                missing.append(str(package.relative_to(ROOT)))
    assert not missing, "README's Layout leaves out: " + ", ".join(missing)


BENCHMARKS = ROOT / "BENCHMARKS.md"
BENCHMARKS_LOG = ROOT / "docs" / "benchmarks-log.md"
BENCHMARKS_MAX_LINES = 300  # one table per topic; the method and history go to the log


def headings(path: Path) -> list[str]:
    return [h.strip() for h in re.findall(r"^#+ (.+)$", path.read_text(), flags=re.M)]


def one_line(text: str) -> str:
    """Text with comment continuations and line breaks folded into single spaces."""
    return " ".join(re.sub(r"\n\s*#", " ", text).split())


def test_benchmarks_holds_current_results_only():
    lines = BENCHMARKS.read_text().count("\n")
    assert lines <= BENCHMARKS_MAX_LINES, (
        f"BENCHMARKS.md has {lines} lines: keep one table per topic there and move the method "
        "and the history to docs/benchmarks-log.md"
    )


def test_benchmarks_cites_only_sections_its_log_has():
    log = headings(BENCHMARKS_LOG)
    cited = re.findall(r'"([^"]+)"', one_line(BENCHMARKS.read_text()))
    assert len(cited) >= 10  # the pattern still finds the citations
    missing = [c for c in cited if not any(h.startswith(c) for h in log)]
    assert not missing, "docs/benchmarks-log.md has no section: " + "; ".join(missing)


def test_every_cited_benchmarks_section_exists():
    sections = headings(BENCHMARKS)
    cited, missing = 0, []
    for path in project_files():
        for title in re.findall(r'BENCHMARKS\.md, "([^"]+)"', one_line(path.read_text())):
            cited += 1
            if not any(h.startswith(title) for h in sections):
                missing.append(f"{path.relative_to(ROOT)}: {title}")
    assert cited >= 3  # the pattern still finds the citations (README, trainer/)
    assert not missing, "BENCHMARKS.md has no section: " + "; ".join(missing)
