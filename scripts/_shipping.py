"""Shared helpers of the corpus build scripts: fetching Debian packages without installing
them, deterministic gzip TSV files, checksums, SHA256SUMS and data-card statistics."""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import io
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"


def parse_args(doc: str) -> argparse.Namespace:
    """The two options every build script takes: --out-dir and --cache-dir."""
    parser = argparse.ArgumentParser(description=doc.strip().splitlines()[0])
    parser.add_argument("--out-dir", type=Path, default=DATA_DIR,
                        help=f"where the data file, its card and SHA256SUMS go (default: {DATA_DIR})")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="keep downloaded .deb files here and reuse them (default: a temporary folder)")
    return parser.parse_args()


@contextlib.contextmanager
def cache_folder(path: Path | None):
    """The given cache folder (created if needed), or a temporary one removed afterwards."""
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        yield path
    else:
        with tempfile.TemporaryDirectory(prefix="course-data-") as tmp:
            yield Path(tmp)


def fetch_debs(packages: list[str], cache: Path) -> tuple[Path, dict[str, str]]:
    """Download (apt-get download) and unpack (dpkg-deb -x) packages; return root and versions."""
    missing = [tool for tool in ("apt-get", "dpkg-deb") if shutil.which(tool) is None]
    if missing:
        sys.exit(f"error: {' and '.join(missing)} not found. This script unpacks Debian packages "
                 "and needs a Debian or Ubuntu system with apt (run `apt-get update` first).")
    root, versions = cache / "root", {}
    for package in packages:
        debs = sorted(cache.glob(f"{package}_*.deb"))
        if not debs:
            done = subprocess.run(["apt-get", "download", package], cwd=cache,
                                  capture_output=True, text=True)
            debs = sorted(cache.glob(f"{package}_*.deb"))
            if done.returncode or not debs:
                sys.exit(f"error: `apt-get download {package}` failed (try `apt-get update`):\n"
                         f"{done.stderr.strip()}")
        deb = debs[-1]
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
        versions[package] = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], check=True,
                                           capture_output=True, text=True).stdout.strip()
    return root, versions


def write_tsv_gz(path: Path, header: list[str], rows: list[tuple]) -> None:
    """Write a UTF-8 TSV as gzip with a fixed header (mtime 0, no file name): same rows, same bytes."""
    lines = []
    for row in [header, *rows]:
        fields = [str(x) for x in row]
        assert len(fields) == len(header), row
        assert not any(c in f for f in fields for c in "\t\n\r"), row
        lines.append("\t".join(fields) + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw,
                                                 compresslevel=9, mtime=0) as gz:
        gz.write("".join(lines).encode("utf-8"))


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def update_sha256sums(out_dir: Path, name: str, digest: str) -> None:
    """Set the line of `name` in out_dir/SHA256SUMS (sha256sum format, sorted by name)."""
    path = out_dir / "SHA256SUMS"
    sums = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                old_digest, old_name = line.split(maxsplit=1)
                sums[old_name.lstrip("*")] = old_digest
    sums[name] = digest
    path.write_text("".join(f"{sums[n]}  {n}\n" for n in sorted(sums)))


def length_stats(lengths: list[int]) -> dict[str, float]:
    """min/median/mean/p90/p99/max of a list of lengths (percentiles: inclusive method)."""
    cuts = statistics.quantiles(lengths, n=100, method="inclusive")
    return {"min": min(lengths), "median": statistics.median(lengths),
            "mean": statistics.fmean(lengths), "p90": cuts[89], "p99": cuts[98],
            "max": max(lengths)}


def stats_table(columns: dict[str, list[int]]) -> str:
    """A Markdown table of length statistics, one row per named list of lengths."""
    out = io.StringIO()
    out.write("| words per row | min | median | mean | p90 | p99 | max |\n")
    out.write("|---|---:|---:|---:|---:|---:|---:|\n")
    for label, lengths in columns.items():
        s = length_stats(lengths)
        out.write(f"| {label} | " + " | ".join(f"{v:g}" if k != "mean" else f"{v:.1f}"
                                                for k, v in s.items()) + " |\n")
    return out.getvalue()


def ship(out_dir: Path, name: str, header: list[str], rows: list[tuple], card) -> tuple[Path, str]:
    """Write data file `name`, record its sha256, then write its card: card(size, digest) -> Markdown."""
    path = out_dir / name
    write_tsv_gz(path, header, rows)
    digest = sha256_file(path)
    update_sha256sums(out_dir, name, digest)
    (out_dir / name.replace(".tsv.gz", ".md")).write_text(card(path.stat().st_size, digest))
    return path, digest


def record_checkpoint(out_dir: Path, path: Path) -> str:
    """The sha256 of a checkpoint just written, recorded in ``out_dir/SHA256SUMS``."""
    digest = sha256_file(path)
    update_sha256sums(out_dir, path.name, digest)
    return digest


def machine_line() -> str:
    """Where a checkpoint was trained, for its data card: CPU kind, torch, threads."""
    import platform
    import torch
    return f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} thread(s)"
