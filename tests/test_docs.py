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
- README.md stays a page a newcomer reads (set-up, the two commands, a tour, the layout): the
  reference lives in docs/, every page of which README.md links, and every relative link of
  README.md, CONTRIBUTING.md and docs/ (with its #anchor) leads to a file and heading that exist.
- Code, tests and configuration cite no "issue N" of a tracker that is not in the repository:
  they say in words what they are about. The Markdown pages may: BENCHMARKS.md and
  docs/benchmarks-log.md, docs/contract-changes.md and docs/sandbox.md are logs of what was
  measured, changed or attacked when, and the issue names the occasion.

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


# The pages a contributor reads: README.md and the reference moved out of it. The design docs,
# the benchmarks log and the contract's history may name paths of their time.
CONTRIBUTOR_PAGES = (
    "README.md",
    "CONTRIBUTING.md",
    "docs/api.md",
    "docs/cli.md",
    "docs/configuration.md",
    "docs/deploy.md",
    "docs/mlflow.md",
    "docs/web.md",
)


def test_the_contributor_pages_name_only_paths_that_exist():
    wrong = []
    for page in CONTRIBUTOR_PAGES:
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


README = ROOT / "README.md"
README_MAX_LINES = 300  # set-up, the two commands, a tour and the layout; reference in docs/
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")


def test_the_readme_fits_a_newcomer():
    lines = README.read_text().count("\n")
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines: keep set-up, the two commands, the tour and the layout "
        "there and move reference material into a page of docs/ that it links"
    )


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_anchor_follows_github():
    assert anchor("The embedded default, and when to switch to PostgreSQL") == (
        "the-embedded-default-and-when-to-switch-to-postgresql"
    )
    assert anchor("A vLLM rollout engine") == "a-vllm-rollout-engine"
    assert anchor("What `make run` does and prints") == "what-make-run-does-and-prints"


def markdown_pages() -> list[Path]:
    return [README, ROOT / "CONTRIBUTING.md", BENCHMARKS, *sorted((ROOT / "docs").glob("*.md"))]


def test_every_relative_link_leads_somewhere():
    wrong, checked = [], 0
    for page in markdown_pages():
        # links inside code blocks are code, not links
        text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            checked += 1
            path, _, fragment = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                wrong.append(f"{page.relative_to(ROOT)}: ({target}): no such file")
            elif fragment and fragment not in {anchor(h) for h in headings(dest)}:
                wrong.append(f"{page.relative_to(ROOT)}: ({target}): no such heading")
    assert checked >= 10  # the pattern still finds the links
    assert not wrong, "links that lead nowhere:\n" + "\n".join(wrong)


def test_the_readme_links_every_page_of_docs():
    linked = {
        (ROOT / target.partition("#")[0]).resolve() for target in LINK.findall(README.read_text())
    }
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not missing, "README.md links no: " + ", ".join(missing)


# "issue 35", "issues 24, 34", "test_mlflow_client_issue24", "issue-12"
ISSUE = re.compile(r"\bissues? ?-?\d|_issue_?\d", re.I)
CODE_SUFFIXES = {".py", ".html", ".js", ".css", ".sh", ".yml", ".yaml", ".toml", ".txt", ".cfg"}
CODE_NAMES = {"Makefile", "Dockerfile", "run", ".env.example"}


def code_files() -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".venv")]
        found += [
            Path(folder, f) for f in files if Path(f).suffix in CODE_SUFFIXES or f in CODE_NAMES
        ]
    return sorted(found)


# The bytes of trainer/tiny.py are part of the tiny models' recipe hash: an edit, even to a
# comment, leaves the shipped tiny-s behind its recipe (every machine then warm-starts it for
# minutes) until `python -m trainer build-model tiny-s --ship`. Its one citation goes with the
# next change that rebuilds tiny-s anyway.
HASHED_SOURCES = {Path("trainer/tiny.py")}


def test_code_says_what_it_is_about_not_which_issue():
    cited = []
    for path in code_files():
        rel = path.relative_to(ROOT)
        if rel in HASHED_SOURCES:
            continue
        if ISSUE.search(str(rel)):
            cited.append(f"{rel}: the file's name")
        for line_no, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if ISSUE.search(line) and rel != Path(__file__).resolve().relative_to(ROOT):
                cited.append(f"{rel}:{line_no}: {line.strip()}")
    assert not cited, "say in words what it is about, not which issue:\n" + "\n".join(cited)


def test_the_issue_pattern_finds_citations():
    for text in ("(issue 35)", "Issue 24's", "issues 24, 34", "test_mlflow_client_issue24.py"):
        assert ISSUE.search(text), text
    for text in ("issued 3 tokens", "the issue", "tissue 4"):
        assert not ISSUE.search(text), text
    assert any(p.name == "Makefile" for p in code_files())
    assert any(p.suffix == ".css" for p in code_files())
