"""Check: no file of the repository shares a run of 200 characters with the development datasets.

The project reads LoCoMo, τ-bench and HotpotQA from ``../shared/data`` (``locomo-dev/``,
``tau-bench-airline-dev/``, ``hotpotqa-dev/``) and must not carry copies or excerpts of them.
This script compares every file git tracks (its working-tree content) with every file of those
three folders and reports each shared run of at least ``--window`` characters (200). Run from the
repo root::

    .venv/bin/python bench/check_no_dataset_copies.py [--data ../shared/data] [--window 200] \\
        [--untracked]

The exit status is 0 when nothing is shared, 1 when a run is found, 2 when a folder is missing.

How. Both sides are compared in three readings, so that a copy survives neither re-escaping nor
re-wrapping: the text itself, the text with JSON/Python string escapes (``\\n``, ``\\"``,
``\\u2019``…) decoded once, and decoded twice (a tool result is JSON inside a JSON string). Each
reading has its runs of whitespace collapsed to one space. The dataset readings are indexed by
their ``K``-character substrings starting at every ``STEP``-th position, ``STEP = window - K + 1``:
any shared run of ``window`` characters holds one of these anchors whole. Every ``K``-character
substring of every repository reading is looked up; a hit is extended both ways along its
alignment, and each alignment is extended once. Files with NUL bytes (binary) are skipped.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO_ROOT / ".." / "shared" / "data"
DATASETS = ("locomo-dev", "tau-bench-airline-dev", "hotpotqa-dev")
WINDOW = 200
K = 48
"""Anchor length: long enough to be rare in JSON boilerplate, short enough to leave a big step."""

_ESCAPE = re.compile(r'\\(u[0-9a-fA-F]{4}|[nrtbf"\\/\'])')
_SIMPLE = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", '"': '"', "\\": "\\",
           "/": "/", "'": "'"}
_SPACE = re.compile(r"\s+")


def _unescape_one(match: re.Match[str]) -> str:
    code = match.group(1)
    return chr(int(code[1:], 16)) if code[0] == "u" else _SIMPLE[code]


def unescape(text: str) -> str:
    """``text`` with JSON / Python string escapes decoded once (surrogate pairs joined)."""
    decoded = _ESCAPE.sub(_unescape_one, text)
    return decoded.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def readings(text: str) -> list[str]:
    """The three readings of ``text`` (distinct ones), whitespace runs collapsed."""
    once = unescape(text)
    out: list[str] = []
    for variant in (text, once, unescape(once)):
        normal = _SPACE.sub(" ", variant).strip()
        if normal not in out:
            out.append(normal)
    return out


def read_text(path: Path) -> str | None:
    """The file as text, or None when it is binary or unreadable."""
    try:
        raw = path.read_bytes()
    except OSError:
        return None
    if b"\0" in raw:
        return None
    return raw.decode("utf-8", "replace")


@dataclass(frozen=True, slots=True)
class Match:
    """A shared run: where it is in a repository file and in a dataset file."""

    repo_file: str
    dataset_file: str
    length: int
    text: str


class DatasetIndex:
    """Anchors of the dataset readings: ``K``-character substrings every ``STEP`` positions."""

    def __init__(self, window: int = WINDOW, k: int = K) -> None:
        if window < 1:
            raise ValueError(f"window must be positive, not {window}")
        k = min(k, window)
        self.window, self.k, self.step = window, k, window - k + 1
        self.texts: list[str] = []
        self.names: list[str] = []
        self.anchors: dict[str, list[tuple[int, int]]] = defaultdict(list)
        self.chars = 0

    def add(self, name: str, text: str) -> None:
        for reading in readings(text):
            doc = len(self.texts)
            self.texts.append(reading)
            self.names.append(name)
            self.chars += len(reading)
            anchors = self.anchors
            for pos in range(0, len(reading) - self.k + 1, self.step):
                anchors[reading[pos:pos + self.k]].append((doc, pos))

    def find(self, name: str, text: str) -> list[Match]:
        """Shared runs of at least ``window`` characters between ``text`` and the datasets."""
        found: dict[tuple[str, str], Match] = {}
        for reading in readings(text):
            for match in self._find_in(name, reading):
                key = (match.dataset_file, match.text[:self.k])
                if key not in found or found[key].length < match.length:
                    found[key] = match
        return sorted(found.values(), key=lambda m: -m.length)

    def _find_in(self, name: str, text: str) -> Iterable[Match]:
        k, anchors, texts = self.k, self.anchors, self.texts
        done: dict[tuple[int, int], int] = {}  # alignment (doc, q - p) -> extended up to p
        for p in range(len(text) - k + 1):
            hits = anchors.get(text[p:p + k])
            if not hits:
                continue
            for doc, q in hits:
                alignment = (doc, q - p)
                if done.get(alignment, -1) > p:
                    continue
                data = texts[doc]
                back = _common_backward(text, p, data, q)
                ahead = _common_forward(text, p, data, q)
                done[alignment] = p + ahead
                if back + ahead >= self.window:
                    start = p - back
                    yield Match(name, self.names[doc], back + ahead,
                                text[start:start + back + ahead])


def _common_forward(a: str, i: int, b: str, j: int) -> int:
    """Length of the common prefix of ``a[i:]`` and ``b[j:]``."""
    n, chunk = 0, 64
    limit = min(len(a) - i, len(b) - j)
    while n + chunk <= limit and a[i + n:i + n + chunk] == b[j + n:j + n + chunk]:
        n += chunk
    while n < limit and a[i + n] == b[j + n]:
        n += 1
    return n


def _common_backward(a: str, i: int, b: str, j: int) -> int:
    """Length of the common suffix of ``a[:i]`` and ``b[:j]``."""
    n, chunk = 0, 64
    limit = min(i, j)
    while n + chunk <= limit and a[i - n - chunk:i - n] == b[j - n - chunk:j - n]:
        n += chunk
    while n < limit and a[i - n - 1] == b[j - n - 1]:
        n += 1
    return n


def dataset_files(data: Path) -> list[Path]:
    """Every file of the three dataset folders (``FileNotFoundError`` when one is missing)."""
    files: list[Path] = []
    for name in DATASETS:
        folder = data / name
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder} is missing (expected the {name} dataset)")
        files.extend(sorted(p for p in folder.rglob("*") if p.is_file()))
    return files


def repo_files(root: Path, untracked: bool = False) -> list[str]:
    """Paths (relative to ``root``) of the files git tracks; with ``untracked`` also the
    untracked files that are not ignored."""
    args = ["git", "-C", str(root), "ls-files", "-z", "--cached"]
    if untracked:
        args += ["--others", "--exclude-standard"]
    out = subprocess.run(args, check=True, capture_output=True).stdout.decode("utf-8")
    return sorted({p for p in out.split("\0") if p})


@dataclass(frozen=True, slots=True)
class Report:
    matches: list[Match]
    repo_count: int
    repo_chars: int
    dataset_count: int
    dataset_chars: int
    seconds: float


def check(data: Path = DEFAULT_DATA, root: Path = REPO_ROOT, window: int = WINDOW,
          paths: Sequence[str] | None = None, untracked: bool = False) -> Report:
    """Compare the files ``paths`` of ``root`` (default: every tracked file) with the datasets."""
    started = time.perf_counter()
    index = DatasetIndex(window)
    files = dataset_files(data)
    for path in files:
        text = read_text(path)
        if text is not None:
            index.add(str(path.relative_to(data)), text)
    matches: list[Match] = []
    repo_count = repo_chars = 0
    for rel in paths if paths is not None else repo_files(root, untracked):
        text = read_text(root / rel)
        if text is None:
            continue
        repo_count += 1
        repo_chars += len(text)
        matches.extend(index.find(rel, text))
    return Report(matches, repo_count, repo_chars, len(files), index.chars,
                  time.perf_counter() - started)


def format_report(report: Report, window: int = WINDOW, shown: int = 3) -> str:
    """Per file: how many runs are shared and the ``shown`` longest; then the verdict."""
    by_file: dict[str, list[Match]] = defaultdict(list)
    for match in report.matches:
        by_file[match.repo_file].append(match)
    lines = []
    for path, matches in sorted(by_file.items()):
        lines.append(f"{path}: {len(matches)} shared run(s), the longest {matches[0].length} "
                     f"characters")
        lines += [f"    {m.length} chars with {m.dataset_file}: {m.text[:100]!r}…"
                  for m in matches[:shown]]
    verdict = (f"{len(report.matches)} shared run(s) of {window}+ characters in "
               f"{len(by_file)} file(s)" if report.matches
               else f"no shared run of {window} characters")
    lines.append(f"{report.repo_count} repository files ({report.repo_chars:,} chars) against "
                 f"{report.dataset_count} dataset files ({report.dataset_chars:,} chars in all "
                 f"readings): {verdict} ({report.seconds:.1f} s)")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="folder holding locomo-dev/, tau-bench-airline-dev/, hotpotqa-dev/")
    parser.add_argument("--window", type=int, default=WINDOW,
                        help=f"shortest shared run to report (default {WINDOW})")
    parser.add_argument("--untracked", action="store_true",
                        help="also check untracked files that git does not ignore")
    args = parser.parse_args(argv)
    try:
        report = check(args.data, REPO_ROOT, args.window, untracked=args.untracked)
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_report(report, args.window))
    return 1 if report.matches else 0


if __name__ == "__main__":
    sys.exit(main())
