"""Fetch the JavaScript that the offline slide decks need into slides/vendor/ (run once;
the result is committed). Needs `npm` and the npm registry; nothing else does.

Usage: python scripts/fetch_slide_vendor.py [--check]

Each package is `npm pack`ed at a pinned version, its tarball checked against the pinned
sha512 (npm's `dist.integrity`), and only the files a deck loads are copied out, with the
package's licence. slides/vendor/SHA256SUMS records every copied file; `--check` verifies
the committed copy against it without the network (tests/test_slides.py does this).
"""

from __future__ import annotations

import argparse
import base64
import fnmatch
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENDOR = REPO / "slides" / "vendor"
SUMS = VENDOR / "SHA256SUMS"

#: package spec -> (npm dist.integrity, target folder, files to keep (globs under package/))
PACKAGES = {
    "reveal.js@4.6.1": (
        "sha512-1CW0auaXNPmwmvQ7TwpszwVxMi2Xr5cTS3J3EBC/HHgbPF32Dn7aiu/LKWDOGjMbaDwKQiGmfqcoGQ74HUHCMw==",
        "reveal.js",
        ["LICENSE", "dist/reveal.js", "dist/reveal.css", "dist/theme/white.css",
         "dist/theme/fonts/source-sans-pro/LICENSE", "dist/theme/fonts/source-sans-pro/*.css",
         "dist/theme/fonts/source-sans-pro/*.woff", "plugin/notes/notes.js"]),
    "requirejs@2.3.7": (  # the MIT licence is in the header of require.js itself
        "sha512-DouTG8T1WanGok6Qjg2SXuCMzszOo0eHeH9hDZ5Y4x8Je+9JB38HdTLT4/VA8OaUhBa0JPVHJ0pyBkM1z+pDsw==",
        ".",
        ["require.js"]),
    "mathjax@2.7.9": (  # one combined configuration (TeX-AMS_CHTML) and what it loads
        "sha512-NOGEDTIM9+MrsqnjPEjVGNx4q0GQxqm61yQwSK+/5S59i26wId5IC5gNu9/bu8+CCVl5p9G2IHcAl/wJa+5+BQ==",
        "mathjax",
        ["LICENSE", "MathJax.js", "config/TeX-AMS_CHTML.js", "jax/output/CommonHTML/*",
         "jax/element/mml/optable/*", "fonts/HTML-CSS/TeX/woff/*", "extensions/TeX/*",
         "extensions/MathMenu.js", "extensions/MathZoom.js"]),
}


def sri(path: Path) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def vendored_files() -> list[Path]:
    return sorted(p for p in VENDOR.rglob("*") if p.is_file() and p != SUMS and p.name != "README.md")


def check() -> list[str]:
    """Problems with slides/vendor/ compared with SHA256SUMS (empty when all is well)."""
    if not SUMS.exists():
        return [f"{SUMS} is missing: run scripts/fetch_slide_vendor.py"]
    recorded = dict(reversed(line.split("  ", 1)) for line in SUMS.read_text().splitlines() if line)
    present = {p.relative_to(VENDOR).as_posix(): p for p in vendored_files()}
    problems = [f"missing: {name}" for name in sorted(set(recorded) - set(present))]
    problems += [f"not in SHA256SUMS: {name}" for name in sorted(set(present) - set(recorded))]
    problems += [f"changed: {name}" for name in sorted(set(recorded) & set(present))
                 if sha256(present[name]) != recorded[name]]
    return problems


def fetch() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / "vendor"
        for spec, (integrity, folder, patterns) in PACKAGES.items():
            out = subprocess.run(["npm", "pack", spec, "--silent", "--pack-destination", tmp],
                                 check=True, capture_output=True, text=True).stdout.split()[-1]
            tarball = Path(tmp) / out
            if sri(tarball) != integrity:
                sys.exit(f"{spec}: tarball integrity {sri(tarball)} != pinned {integrity}")
            with tarfile.open(tarball) as tar:
                for member in tar.getmembers():
                    name = member.name.removeprefix("package/")
                    if member.isfile() and any(fnmatch.fnmatch(name, p) for p in patterns):  # * spans /
                        target = staged / folder / name
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(tar.extractfile(member).read())
            print(f"{spec}: {tarball.name} verified")
        for keep in ("README.md",):
            if (VENDOR / keep).exists():
                shutil.copy2(VENDOR / keep, staged / keep)
        if VENDOR.exists():
            shutil.rmtree(VENDOR)
        shutil.copytree(staged, VENDOR)
    SUMS.write_text("".join(f"{sha256(p)}  {p.relative_to(VENDOR).as_posix()}\n" for p in vendored_files()))
    size = sum(p.stat().st_size for p in vendored_files())
    print(f"{len(vendored_files())} files, {size / 1e6:.2f} MB in {VENDOR}; checksums in {SUMS.name}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify slides/vendor/ against SHA256SUMS")
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        print("\n".join(problems) or f"{len(vendored_files())} vendored files match {SUMS.name}")
        return 1 if problems else 0
    fetch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
