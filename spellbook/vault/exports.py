"""Where an export may be written, and the writing of it (docs/export.md, docs/security.md).

An agent names the file an ``export`` goes to, so the name is not trusted. The rule:

* The file is in the exports folder (``<index folder>/exports/``; a relative path is a file there)
  or in a folder a person named in ``SPELLBOOK_EXPORT_DIRS``. Nowhere else.
* No part of the path below that folder is a symbolic link, the file included; no part is hidden
  (a name starting with ``.``), so ``.obsidian/``, ``.git/`` and the ledger are out of reach.
* Never inside the vault (it would be indexed, or land in a tool folder) nor the index folder,
  other than the exports folder itself.
* An existing file is replaced only with ``overwrite`` and only if Spellbook exported it: the
  ledger (``<index folder>/exports.ledger``, 0600) holds the device, inode and SHA-256 of each file
  written; a file that differs in any of them was not ours, or was changed since, and is kept.
  Devices, FIFOs, sockets and folders are refused whatever the flag says.

Exports are written atomically and 0600: they hold every note's text.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from spellbook.errors import InvalidInputError
from spellbook.files import atomic_write, private_folder

EXPORTS_DIR = "exports"
LEDGER_NAME = "exports.ledger"
LEDGER_LIMIT = 1000  # files remembered; the oldest are forgotten first
_LEDGER_LOCK = threading.Lock()


@dataclass(frozen=True)
class ExportPlaces:
    """What the rule needs to know: the index and vault folders, and the folders a person allowed."""

    index: Path
    vault: Path
    allowed: tuple[Path, ...] = ()

    @property
    def exports(self) -> Path:
        return self.index / EXPORTS_DIR

    @property
    def ledger(self) -> Path:
        return self.index / LEDGER_NAME

    def describe(self) -> str:
        folders = [str(self.exports), *(str(p) for p in self.allowed)]
        return " or ".join(folders)


def resolve_export_target(path: str, places: ExportPlaces, overwrite: bool = False) -> Path:
    """The file an export named ``path`` may be written to; raises ``InvalidInputError`` saying
    what to pass instead."""
    if not isinstance(path, str) or not path.strip() or "\x00" in path:
        raise InvalidInputError("path is empty: pass a file name like 'memories.json'.")
    text = path.strip()
    given = Path(os.path.expanduser(text))
    if given.is_absolute():
        file = Path(os.path.normpath(given))
        base = next((b for b in _bases(places) if file == b or b in file.parents), None)
        if base == places.exports:
            _exports_folder(places)
        if base is None:
            raise InvalidInputError(
                f"An export may only be written in {places.describe()}; {file} is elsewhere. Pass a file name "
                "like 'memories.json' (kept in the exports folder), or ask the person to add the folder to "
                "SPELLBOOK_EXPORT_DIRS."
            )
    else:
        if ".." in PurePosixPath(text.replace("\\", "/")).parts:
            raise InvalidInputError(f"Relative paths are files in {places.exports}; '..' is not allowed.")
        base = _exports_folder(places)
        file = Path(os.path.normpath(base / text))
    parts = file.relative_to(base).parts
    if not parts:
        raise InvalidInputError(f"{file} is a folder; pass a file name, e.g. {file / 'memories.json'}.")
    if any(part.startswith(".") for part in parts):
        raise InvalidInputError(f"{file}: hidden names (starting with '.') are not export targets; choose another.")
    if base != places.exports and _inside(file, places.vault, places.index):
        raise InvalidInputError(
            f"{file} is inside the vault or the index folder; exports go to {places.exports} or outside the vault."
        )
    folder = base
    for part in parts[:-1]:
        folder = folder / part
        _refuse_link(folder)
        if not folder.is_dir():
            raise InvalidInputError(f"Folder {folder} does not exist; create it or choose another path.")
    _refuse_link(file)
    try:
        st = os.lstat(file)
    except FileNotFoundError:
        return file
    if stat.S_ISDIR(st.st_mode):
        raise InvalidInputError(f"{file} is a folder; pass a file name, e.g. {file / 'memories.json'}.")
    if not stat.S_ISREG(st.st_mode):
        raise InvalidInputError(f"{file} is not a regular file (a device, FIFO or socket); exports never write there.")
    if not overwrite:
        raise InvalidInputError(f"{file} exists; pass overwrite=true to replace it, or choose another path.")
    if not _exported_by_us(file, st, places):
        raise InvalidInputError(
            f"{file} exists and Spellbook did not export it (or it changed since), so it is never replaced. "
            "Choose another file name."
        )
    return file


def write_export(file: Path, text: str, places: ExportPlaces, overwrite: bool = False) -> int:
    """Write an export atomically, 0600, and remember it in the ledger. Returns its size in bytes."""
    data = text.encode("utf-8")
    if not atomic_write(file, text, exclusive=not overwrite, mode=0o600):
        raise InvalidInputError(f"{file} appeared while exporting; choose another path.")
    st = os.lstat(file)
    with _LEDGER_LOCK:
        ledger = _read_ledger(places)
        ledger.pop(str(file), None)
        ledger[str(file)] = {"dev": st.st_dev, "ino": st.st_ino, "sha256": hashlib.sha256(data).hexdigest()}
        while len(ledger) > LEDGER_LIMIT:
            ledger.pop(next(iter(ledger)))
        atomic_write(places.ledger, json.dumps(ledger, indent=0) + "\n", mode=0o600)
    return len(data)


def check_import_source(file: Path) -> None:
    """Imports read regular files only: a device or FIFO would block or never end."""
    try:
        st = os.stat(file)
    except OSError:
        return  # the caller says the file is missing
    if not stat.S_ISREG(st.st_mode):
        raise InvalidInputError(f"{file} is not a regular file (a device, FIFO, socket or folder); pass an export.")


def _exports_folder(places: ExportPlaces) -> Path:
    _refuse_link(places.exports)
    return private_folder(places.exports)


def _bases(places: ExportPlaces) -> list[Path]:
    return [places.exports, *places.allowed]


def _inside(file: Path, *folders: Path) -> bool:
    return any(file == f or f in file.parents for f in folders)


def _refuse_link(file: Path) -> None:
    if file.is_symlink():
        raise InvalidInputError(f"{file} is a symbolic link; exports are never written through one. Choose another.")


def _exported_by_us(file: Path, st: os.stat_result, places: ExportPlaces) -> bool:
    with _LEDGER_LOCK:
        entry = _read_ledger(places).get(str(file))
    if not entry or entry.get("dev") != st.st_dev or entry.get("ino") != st.st_ino:
        return False
    digest = hashlib.sha256()
    with open(file, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest() == entry.get("sha256")


def _read_ledger(places: ExportPlaces) -> dict[str, dict]:
    try:
        data = json.loads(places.ledger.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_chosen_file(file: Path, text: str, force: bool = False) -> None:
    """``spellbook export --out FILE``: a person at their own shell names the file, anywhere they
    can write. Still: never through a symbolic link at FILE, never onto a device, FIFO, socket or
    folder, and never over an existing file without ``force``. A new file is 0600; a replaced one
    keeps its mode."""
    existed = check_chosen_file(file, force)
    if not atomic_write(file, text, exclusive=not force, mode=None if existed else 0o600):
        raise InvalidInputError(f"{file} appeared while exporting; pass --force to replace it.")


def check_chosen_file(file: Path, force: bool = False) -> bool:
    """``write_chosen_file``'s checks, to run before the work; True if the file exists."""
    try:
        st = os.lstat(file)
    except FileNotFoundError:
        st = None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise InvalidInputError(f"{file} is a symbolic link; pass the file it points to, or another name.")
        if not stat.S_ISREG(st.st_mode):
            raise InvalidInputError(f"{file} is not a regular file (a device, FIFO, socket or folder); choose a file.")
        if not force:
            raise InvalidInputError(f"{file} exists; pass --force to replace it, or choose another name.")
    if not file.parent.is_dir():
        raise InvalidInputError(f"Folder {file.parent} does not exist; create it or choose another path.")
    return st is not None
