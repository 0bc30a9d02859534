#!/usr/bin/env python3
"""Fetch a labelled real-code set's files from PyPI into its git-ignored corpus folder, checked by sha256.

    python3 bench/tools/fetch_realcode.py heldout7            # bench/realcode/heldout7/SOURCES.tsv -> corpus-heldout7/
    python3 bench/tools/fetch_realcode.py tuning              # bench/realcode/SOURCES.tsv -> corpus-extra/
    python3 bench/tools/fetch_realcode.py --all               # every set

A SOURCES.tsv row names its package in the version column ("v5.24.0 (PyPI transformers==5.24.0)", ", sdist" when the
file is only in the source archive). The archive is downloaded once per release (PyPI's JSON API, its sha256
checked, into the git-ignored .realcode-cache/); the file is found in it by name and accepted only when its sha256 is
the one the row records: a file that differs from the labelled text is never scored. Rows pinned to a git commit (no PyPI package) are listed for reading by
hand (the repository at that commit), as are rows whose text differs from the package's. Files already present with the
right sha256 are kept. Nothing is ever committed: the corpus folders are git-ignored.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import re
import sys
import tarfile
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REALCODE = ROOT / "bench" / "realcode"
PYPI_RE = re.compile(r"PyPI\s+([A-Za-z0-9_.\-]+)==([^\s,)]+)(,\s*sdist)?")


@dataclass(frozen=True)
class Row:
    file: str
    repo: str
    path: str
    version: str
    sha256: str

    @property
    def package(self) -> tuple[str, str, bool] | None:
        """(name, version, sdist) when the row's text comes from a PyPI release as published."""
        m = PYPI_RE.search(self.version)
        if not m or "edit" in self.version:
            return None
        return m.group(1), m.group(2), bool(m.group(3))


def set_paths(name: str) -> tuple[Path, Path]:
    """The SOURCES.tsv and corpus folder of a set ("tuning" is the top-level set scored into corpus-extra/)."""
    if name == "tuning":
        return REALCODE / "SOURCES.tsv", ROOT / "corpus-extra"
    if not re.fullmatch(r"[a-z0-9-]+", name) or not (REALCODE / name / "SOURCES.tsv").is_file():
        raise SystemExit(f"fetch_realcode: no labelled set {name!r} (a folder of bench/realcode/ with a SOURCES.tsv)")
    return REALCODE / name / "SOURCES.tsv", ROOT / f"corpus-{name}"


def read_rows(sources: Path) -> list[Row]:
    with sources.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f, delimiter="\t")
        missing = {"file", "repo", "path", "version", "sha256"} - set(reader.fieldnames or [])
        if missing:
            raise SystemExit(f"fetch_realcode: {sources} lacks the column(s) {', '.join(sorted(missing))}")
        return [Row(r["file"], r["repo"], r["path"], r["version"], r["sha256"].strip().lower()) for r in reader]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def files_named(archive: Path, base: str) -> list[tuple[str, bytes]]:
    """(path, bytes) of every file called base in a wheel, zip or tar archive."""
    found = []
    if archive.name.endswith((".whl", ".zip")):
        with zipfile.ZipFile(archive) as z:
            for info in z.infolist():
                if not info.is_dir() and info.filename.rsplit("/", 1)[-1] == base:
                    found.append((info.filename, z.read(info)))
    else:
        with tarfile.open(archive) as t:
            for m in t.getmembers():
                if m.isfile() and m.name.rsplit("/", 1)[-1] == base:
                    found.append((m.name, t.extractfile(m).read()))
    return found


def find_in(archive: Path, row: Row) -> bytes | None:
    """The archive's file with the row's base name and sha256 (several files may share a name: the hash decides)."""
    for _, data in files_named(archive, row.path.rsplit("/", 1)[-1]):
        if sha256(data) == row.sha256:
            return data
    return None


def archive_order(files: list[dict], sdist: bool) -> list[dict]:
    """The release's files in the order to read them: the source archive when the row says sdist; else a pure-Python
    wheel, a Linux x86-64 wheel (Windows wheels may carry other line endings), any wheel, the source archive."""
    def rank(f: dict) -> int:
        name, kind = f["filename"], f.get("packagetype")
        if kind == "sdist":
            return 0 if sdist else 4
        if sdist:
            return 5
        return 1 if name.endswith("-none-any.whl") else 2 if "linux" in name and "x86_64" in name else 3
    return sorted(files, key=rank)[:3]


def release_files(name: str, version: str, index: str) -> tuple[str, list[dict]]:
    listing = f"{index}/pypi/{name}/json"
    try:
        with urllib.request.urlopen(listing, timeout=60) as r:
            return listing, json.load(r).get("releases", {}).get(version, [])
    except (OSError, ValueError) as e:
        raise RuntimeError(f"{index} has no release list for {name}: {e}") from e


def download(listing: str, f: dict, cache: Path) -> Path:
    """One release file in cache; its sha256 is checked against the index's."""
    cache.mkdir(parents=True, exist_ok=True)
    target = cache / f["filename"]
    want = f.get("digests", {}).get("sha256", "")
    if not (target.is_file() and sha256(target.read_bytes()) == want):
        # A mirror may list its files relative to the listing.
        with urllib.request.urlopen(urllib.parse.urljoin(listing, f["url"]), timeout=600) as r:
            data = r.read()
        if sha256(data) != want:
            raise RuntimeError(f"{f['filename']} does not match the index's sha256")
        target.write_bytes(data)
    return target


def fetch_row(row: Row, pkg: tuple[str, str, bool], cache: Path, index: str) -> bytes:
    """The row's text from its release, tried in up to three of the release's archives until the sha256 matches."""
    listing, files = release_files(pkg[0], pkg[1], index)
    order = archive_order(files, pkg[2])
    if not order:
        raise RuntimeError(f"{index} lists no archive of {pkg[0]}=={pkg[1]}")
    for f in order:
        data = find_in(download(listing, f, cache), row)
        if data is not None:
            return data
    tried = ", ".join(f["filename"] for f in order)
    raise RuntimeError(f"no file {row.path} with sha256 {row.sha256[:16]}... in {tried}")


def fetch_set(name: str, cache: Path, index: str) -> tuple[int, list[str]]:
    """Fetch one set; returns (files in place, lines for what needs a hand)."""
    sources, corpus = set_paths(name)
    return fetch_into(name, sources, corpus, cache, index)


def fetch_into(name: str, sources: Path, corpus: Path, cache: Path, index: str) -> tuple[int, list[str]]:
    rows = read_rows(sources)
    corpus.mkdir(exist_ok=True)
    ok, todo = 0, []
    for row in rows:
        target = corpus / row.file
        if target.is_file() and sha256(target.read_bytes()) == row.sha256:
            ok += 1
            continue
        pkg = row.package
        if pkg is None:
            todo.append(f"{name}: {row.file}: read {row.repo} {row.path} at {row.version} by hand (sha256 {row.sha256[:16]}...)")
            continue
        try:
            data = fetch_row(row, pkg, cache, index)
        except (RuntimeError, OSError, ValueError, tarfile.TarError, zipfile.BadZipFile) as e:
            todo.append(f"{name}: {row.file}: {e}")
            continue
        target.write_bytes(data)
        ok += 1
    print(f"{name}: {ok} of {len(rows)} files in {corpus}/")
    return ok, todo


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("sets", nargs="*", help="set names (heldout, heldout3, ..., tuning)")
    ap.add_argument("--all", action="store_true", help="every set under bench/realcode/ and the tuning set")
    ap.add_argument("--cache", type=Path, default=ROOT / ".realcode-cache", help="where archives are kept [.realcode-cache]")
    ap.add_argument("--index", default="https://pypi.org", help="the package index with PyPI's JSON API [https://pypi.org]")
    args = ap.parse_args(argv)
    names = list(args.sets)
    if args.all:
        names = ["tuning"] + sorted(p.parent.name for p in REALCODE.glob("*/SOURCES.tsv"))
    if not names:
        ap.error("name a set (e.g. heldout7) or pass --all")
    todo: list[str] = []
    for n in names:
        todo += fetch_set(n, args.cache, args.index.rstrip("/"))[1]
    for line in todo:
        print("  to do:", line)
    return 1 if todo else 0


if __name__ == "__main__":
    sys.exit(main())
