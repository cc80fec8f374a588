"""Files written whole or not at all (spellbook/files.py): every temp-file-and-rename in the
package is this module's, a write cut short leaves the old file and no temp, and the modes a file
gets are the ones docs/security.md promises. Real files in temporary folders."""

from __future__ import annotations

import ast
import os
import stat
from pathlib import Path

import numpy as np
import pytest

from spellbook.files import atomic_output, atomic_write, backup_copy, private_file, private_folder

PACKAGE = Path(__file__).resolve().parents[2] / "spellbook"
# Calls that make a temp file or put one in place. Outside files.py they are allowed only where a
# file is moved, not written (the store's trash and archive moves, the owner's socket).
WRITING_CALLS = {"replace", "rename", "mkstemp", "NamedTemporaryFile", "mkdtemp"}
ALLOWED = {
    "vault/store.py": "a note moved to .trash/ or _archive/, bytes unchanged",
    "server/channel.py": "the owner's socket, bound in a private folder and renamed into place",
    "cli/doctor.py": "a probe that the folder is writable, removed at once",
    # Hand-rolled writes in modules other work is rewriting now; each is to become an atomic_write.
    "server/front.py": "the handshake cache (moving to startup/ with the start-up tricks)",
    "startup/front.py": "the handshake cache, written before the package's modules load",
}


def writing_calls(source: str) -> list[int]:
    """Lines of ``os.replace``/``os.rename``/``tempfile.mkstemp``... calls in ``source``."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITING_CALLS:
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id in {"os", "tempfile"}:
                lines.append(node.lineno)
    return lines


def test_every_temp_file_and_rename_is_the_files_module() -> None:
    found = []
    for file in sorted(PACKAGE.rglob("*.py")):
        rel = file.relative_to(PACKAGE).as_posix()
        if rel == "files.py" or rel in ALLOWED:
            continue
        found += [f"spellbook/{rel}:{line}" for line in writing_calls(file.read_text(encoding="utf-8"))]
    assert not found, "write through spellbook.files (atomic_write, atomic_output):\n" + "\n".join(found)
    assert writing_calls("import os\nos.replace(a, b)\n") == [2]  # a planted one is caught
    assert writing_calls("fd, tmp = tempfile.mkstemp(dir=d)\n") == [1]


def test_a_write_cut_short_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "table.bin"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_output(target) as f:
        f.write(b"half of the new")
        raise RuntimeError("killed mid-write")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.bin"]


def test_a_piecewise_write_replaces_the_file_and_keeps_its_mode(tmp_path: Path) -> None:
    target = tmp_path / "cache.json"
    target.write_text("{}")
    os.chmod(target, 0o640)
    with atomic_output(target) as f:
        f.write(b'{"a": ')
        f.write(b"1}")
    assert target.read_text() == '{"a": 1}'
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache.json"]


def test_an_array_can_be_mapped_onto_the_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "rows.u8"
    with atomic_output(target) as f:
        rows = np.memmap(f, mode="w+", dtype=np.uint8, shape=(4, 3))
        rows[:] = np.arange(12, dtype=np.uint8).reshape(4, 3)
        rows.flush()
        del rows
    assert target.read_bytes() == bytes(range(12))


def test_a_new_file_gets_its_folders_mode_and_a_private_one_0600(tmp_path: Path) -> None:
    folder = private_folder(tmp_path / "index")
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    atomic_write(folder / "a.json", "{}")
    atomic_write(tmp_path / "token", "secret\n", mode=0o600)
    assert stat.S_IMODE((folder / "a.json").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "token").stat().st_mode) == 0o600
    assert stat.S_IMODE(private_file(tmp_path / "db").stat().st_mode) == 0o600


def test_an_exclusive_write_never_replaces_a_file(tmp_path: Path) -> None:
    target = tmp_path / "note.md"
    assert atomic_write(target, "first", exclusive=True)
    assert not atomic_write(target, "second", exclusive=True)
    assert target.read_text() == "first" and sorted(p.name for p in tmp_path.iterdir()) == ["note.md"]


def test_a_backup_never_replaces_an_earlier_one(tmp_path: Path) -> None:
    file = tmp_path / "settings.json"
    file.write_text("1")
    first = backup_copy(file)
    file.write_text("2")
    second = backup_copy(file, mode=0o600)
    assert first.read_text() == "1" and second.read_text() == "2" and first != second
    assert stat.S_IMODE(second.stat().st_mode) == 0o600
