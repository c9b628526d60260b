"""Release: the student version of each source notebook, made by nbgrader's own
preprocessors (ClearSolutions, ClearHiddenTests, ClearOutput, LockCells, ComputeChecksums),
which need no course directory or database; ``assignments/release/MANIFEST.sha256`` records
what was written, and a release file that differs from it (a student or a lecturer edited
it) is never overwritten: ``release`` names the file and stops, unless ``force``.
"""
from __future__ import annotations

import copy
import hashlib
from pathlib import Path

import nbformat

from course_utils.files import write_atomic
from grader.cells import RELEASE, SOURCE, AssignmentError, shown, source_notebooks

MANIFEST = "MANIFEST.sha256"


def student_version(nb):
    """A copy of source notebook ``nb`` with solutions replaced by stubs (``raise
    NotImplementedError()``), hidden tests removed, outputs cleared, test and read-only
    cells locked and nbgrader checksums recorded."""
    from nbgrader.preprocessors import (ClearHiddenTests, ClearOutput, ClearSolutions,
                                        ComputeChecksums, LockCells)
    nb = copy.deepcopy(nb)
    resources: dict = {}
    for pre in (ClearSolutions(enforce_metadata=True), ClearHiddenTests(enforce_metadata=True),
                ClearOutput(), LockCells(), ComputeChecksums()):
        nb, resources = pre.preprocess(nb, resources)
    return nb


def render(nb) -> bytes:
    """The bytes of a notebook file (stable: the same notebook gives the same bytes)."""
    return (nbformat.writes(nb) + "\n").encode("utf-8")


def release_files(source_dir: Path = SOURCE) -> dict[str, bytes]:
    """Relative path under the release folder -> content, for every assignment."""
    files = {}
    for name, path in source_notebooks(source_dir).items():
        nb = nbformat.read(path, as_version=4)
        files[f"{name}/{name}.ipynb"] = render(student_version(nb))
    return files


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_manifest(release_dir: Path) -> dict[str, str]:
    """Relative path -> sha256 of what ``release`` last wrote (empty if never run)."""
    path = Path(release_dir) / MANIFEST
    if not path.exists():
        return {}
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            digest, rel = line.split(maxsplit=1)
            out[rel.strip()] = digest
    return out


def release(source_dir: Path = SOURCE, release_dir: Path = RELEASE, force: bool = False) -> list[str]:
    """Write the student versions to ``release_dir``; return one line per file.

    A file that exists and differs both from the new version and from what the manifest
    says was written last has been changed by someone: nothing is written and
    ``AssignmentError`` names it, unless ``force``.
    """
    release_dir = Path(release_dir)
    files = release_files(source_dir)
    manifest = read_manifest(release_dir)
    status, changed = {}, []
    for rel, content in files.items():
        path = release_dir / rel
        if not path.exists():
            status[rel] = "new"
            continue
        current = sha256(path.read_bytes())
        if current == sha256(content):
            status[rel] = "unchanged"
        elif manifest.get(rel) == current:
            status[rel] = "updated"
        else:
            status[rel] = "overwritten (FORCE)" if force else "changed by hand"
            changed.append(rel)
    if changed and not force:
        names = "\n".join(f"  {shown(release_dir / rel)}" for rel in changed)
        raise AssignmentError(
            f"refusing to overwrite {len(changed)} file(s) that differ from what `make assignments` "
            f"last wrote (edited by a student or by hand?):\n{names}\n"
            "move them away, or run `make assignments FORCE=1` to overwrite them")
    for rel, content in files.items():
        path = release_dir / rel
        if status[rel] != "unchanged":
            write_atomic(path, content)
    manifest.update({rel: sha256(content) for rel, content in files.items()})
    write_atomic(release_dir / MANIFEST,
                  "".join(f"{digest}  {rel}\n" for rel, digest in sorted(manifest.items())).encode())
    return [f"{status[rel]:>20}  {shown(release_dir / rel)}" for rel in files]
