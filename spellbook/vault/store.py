"""The vault store: the ONLY code that writes note files.

Every write is atomic (``spellbook/files.py``: a unique dotfile temp, fsync, then rename), so a
crash leaves either the old file or the new one, never half of one. The engine's vault makes its
temp files in the index's ``tmp`` folder when the index is in the vault (the default) and on the
note's file system, so nothing transient appears beside a person's notes (for Obsidian, a sync tool
or ``git add``), and the vault watcher sees one event per write instead of six (it cost the owner
~2 ms of CPU a scribe, in three threads); elsewhere, beside the note. A write that names the
version it read refuses to overwrite a file that changed since.

Permissions (docs/security.md, "Writes and files"): a rewritten file keeps the mode it had; a new
file gets its folder's mode without the execute bits, limited by the umask (a 0700 folder gives
0600 notes, 0755 gives 0644, 0750 gives 0640); a new folder gets the mode of the folder it is made
in, limited by the umask (so a private category keeps its topics and notes private).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from spellbook.crashpoints import crash_point
from spellbook.errors import FileChangedError, InvalidInputError, VaultPathError
from spellbook.files import atomic_write, fsync_dir, new_file_mode, place, write_temp
from spellbook.vault.note import content_version
from spellbook.vault.paths import (
    ARCHIVE_DIR,
    IGNORED_DIRS,
    first_symlink,
    is_ignored,
    resolve_path,
    with_suffix_number,
)
from spellbook.vault.syncing import sync_files

TRASH_DIR = ".trash"
_TEMP_NAME = re.compile(r"^\..+\.md\.[A-Za-z0-9_]+\.tmp$")  # what atomic_write creates


@dataclass(frozen=True)
class FileState:
    path: str
    text: str
    version: str
    mtime_ns: int
    size: int


class Vault:
    def __init__(self, root: Path, temp_dir: Path | None = None) -> None:
        self.root = root.expanduser().resolve()
        self.temp_dir = temp_dir  # where writes make their temp files (made when first used), see above
        self._temp_device: int | None = None

    def file(self, path: str) -> Path:
        return resolve_path(self.root, path)

    def stat(self, path: str) -> os.stat_result:
        """``os.stat`` of a path the catalog holds, to compare with what was indexed: the lexical
        checks of ``file`` without resolving symlinks (a search checks each hit; resolving was most
        of that). Never for reading or writing: those go through ``file``."""
        parts = path.split("/")
        if not path or path.startswith("/") or ".." in parts or "\x00" in path or "\\" in path:
            return os.stat(self.file(path))  # raises VaultPathError for what leaves the vault
        return os.stat(os.path.join(self.root, *parts))

    def iter_paths(self) -> Iterator[str]:
        """Every note path in the vault (sorted per folder), skipping tool folders and symlinked dirs."""
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS and not d.startswith("."))
            prefix = os.path.relpath(dirpath, self.root).replace(os.sep, "/")
            prefix = "" if prefix == "." else prefix + "/"
            for name in sorted(filenames):
                path = prefix + name
                if not is_ignored(path):
                    yield path

    def scan_stat(self, path: str) -> os.stat_result:
        """stat() of a path that ``iter_paths`` listed: no symlink resolution (scans of 10k files
        would spend most of their time in it); reading the file still goes through ``file()``."""
        return os.stat(os.path.join(self.root, path))

    def remove_stale_temp_files(self) -> int:
        """Delete ``.<name>.<random>.tmp`` files that a writer killed mid-write left behind, in the
        vault's folders and in ``temp_dir``."""
        removed = 0
        if self.temp_dir is not None and self.temp_dir.is_dir():
            for entry in os.scandir(self.temp_dir):
                if _TEMP_NAME.match(entry.name):
                    Path(entry.path).unlink(missing_ok=True)
                    removed += 1
        for dirpath, dirnames, filenames in os.walk(self.root, followlinks=False):
            dirnames[:] = [d for d in dirnames if d not in IGNORED_DIRS]
            for name in filenames:
                if _TEMP_NAME.match(name):
                    Path(dirpath, name).unlink(missing_ok=True)
                    removed += 1
        return removed

    def read(self, path: str) -> FileState:
        """Read a note. Raises ``InvalidInputError`` for binary or non-UTF-8 files,
        ``IsADirectoryError`` for anything but a regular file."""
        data, st = self.read_bytes(path)
        if data is None:
            raise IsADirectoryError(f"{path} is not a regular file.")
        return decode_note(path, data, st)

    def read_bytes(self, path: str, max_bytes: int | None = None) -> tuple[bytes | None, os.stat_result]:
        """A file's bytes and its stat, from one open: the stat is taken before the read, so a
        change during the read leaves a newer mtime on disk than the one recorded (and is seen).
        The bytes are None for anything but a regular file (never opened for reading, so a FIFO
        does not block) and for a file over ``max_bytes``."""
        fd = os.open(self.file(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or (max_bytes is not None and st.st_size > max_bytes):
                return None, st
            chunks = []
            while block := os.read(fd, max(st.st_size + 1, 65_536)):
                chunks.append(block)
            return b"".join(chunks), st
        finally:
            os.close(fd)

    def create(self, path: str, text: str) -> str:
        """Write a new file at ``path``, or at ``path`` with ' 2', ' 3'... if taken. Returns the path used.

        Taken names are skipped with a cheap existence check; the exclusive link still decides
        when two writers race for the same free name."""
        self._make_folders(self.file(path).parent)
        n = 1
        while True:
            candidate = path if n == 1 else with_suffix_number(path, n)
            n += 1
            target = self.file(candidate)
            if target.exists():
                continue
            if atomic_write(target, text, exclusive=True, temp_folder=self._temp_folder(target.parent)):
                return candidate

    def create_many(self, items: Sequence[tuple[str, str]]) -> list[str | Exception]:
        """``create`` for a batch of new files (an import), made durable together: each text is
        written whole to a temp file, the temps are synced (``syncing.py``), each is then placed at
        its path (or the first free ' 2', ' 3'... name), and the folders synced once each. Per
        item, the path used or the error that stopped it (a failed sync stops every item). A crash
        leaves whole notes and temp files (removed at the next start), never part of a note."""
        results: list[str | Exception] = [""] * len(items)
        temps: list[tuple[int, str, Path, str]] = []  # item, path asked for, its file, temp file
        modes: dict[Path, tuple[int, Path]] = {}  # folder -> a new file's mode there, where its temps go
        try:
            for i, (path, text) in enumerate(items):
                try:
                    target = self.file(path)
                    if target.parent not in modes:
                        self._make_folders(target.parent)
                        modes[target.parent] = new_file_mode(target.parent), self._temp_folder(target.parent)
                    temps.append((i, path, target, write_temp(target, text, *modes[target.parent])))
                except (OSError, VaultPathError) as exc:
                    results[i] = exc
            try:
                sync_files([tmp for *_, tmp in temps])  # a name never points at data not on disk
            except OSError as exc:  # none of them is known to be on disk: none is placed
                for i, *_ in temps:
                    results[i] = exc
                return results
            for i, path, target, tmp in temps:
                try:
                    results[i] = self._place_free(path, target, tmp)
                except (OSError, VaultPathError) as exc:
                    results[i] = exc
            for folder in modes:
                fsync_dir(folder)
        finally:
            for *_, tmp in temps:
                Path(tmp).unlink(missing_ok=True)
        return results

    def _place_free(self, path: str, target: Path, tmp: str) -> str:
        """Link ``tmp`` at ``path``, or at the first free numbered name after it; the path used."""
        n = 2
        candidate = path
        while not place(Path(tmp), target):
            candidate, n = with_suffix_number(path, n), n + 1
            target = self.file(candidate)
        crash_point("file-written")
        return candidate

    def write(self, path: str, text: str, expected_version: str | None = None) -> str:
        """Replace a note. With ``expected_version``, refuse if the file changed since it was read.

        Returns the new version. The check and the rename are microseconds apart; a person's save
        in that gap is the only race left, and the file then holds one whole version.
        """
        target = self.file(path)
        if expected_version is not None:
            if not target.exists():
                raise VaultPathError(f"{path} was deleted on disk since you read it; nothing was written.")
            data = target.read_bytes()
            current = content_version(data)
            if current != expected_version:
                raise FileChangedError(path, expected_version, current, data.decode("utf-8", "replace"))
        atomic_write(target, text, temp_folder=self._temp_folder(target.parent))
        return content_version(text)

    def trash(self, path: str) -> str:
        """Move a note to the vault's ``.trash/`` (as Obsidian does); returns where it went."""
        return self._move_under(TRASH_DIR, path)

    def trashed(self) -> Iterator[str]:
        """The paths of the notes in ``.trash/``, never through a symbolic link (``.trash`` included)."""
        top = self.root / TRASH_DIR
        if top.is_symlink() or not top.is_dir():
            return
        for folder, folders, names in os.walk(top, followlinks=False):
            prefix = os.path.relpath(folder, self.root).replace(os.sep, "/")
            folders.sort()
            yield from (f"{prefix}/{name}" for name in sorted(names) if name.endswith(".md"))

    def untrash(self, trash_path: str, path: str) -> bool:
        """Move a file ``trash`` put in ``.trash/`` back to ``path``, never over a file that took its
        place meanwhile (False then: it stays in the trash)."""
        source, target = self.file(trash_path), self.file(path)
        self._make_folders(target.parent)
        if not place(source, target):
            return False
        source.unlink(missing_ok=True)  # linked: the trash copy goes
        return True

    def archive(self, path: str) -> str:
        """Move an expired note to ``_archive/<path>``, bytes unchanged; returns where it went."""
        return self._move_under(ARCHIVE_DIR, path)

    def check_move(self, folder: str, path: str) -> None:
        """Refuse (``VaultPathError``) to move note ``path`` under ``folder`` (``.trash``, ``_archive``)
        when that folder, or any folder on the way to where the note would go, is a symbolic link:
        it may lead out of the vault, and no tool follows a link. Nothing is moved or created."""
        parts = [part for part in f"{folder}/{path}".split("/") if part]
        link = first_symlink(str(self.root), parts)
        if link is not None:
            raise VaultPathError(
                f"{link} in the vault is a symbolic link, and Spellbook never moves a note "
                f"through one; nothing was moved. Make {link} a real folder (or remove the link) "
                "and try again."
            )

    def _move_under(self, folder: str, path: str) -> str:
        source = self.file(path)
        if not source.is_file():
            raise VaultPathError(f"{path} is not a file in the vault.")
        self.check_move(folder, path)
        dest_path = f"{folder}/{path}"
        dest = self.root / dest_path
        self._make_folders(dest.parent)
        n = 2
        while os.path.lexists(dest):  # never replace: 'Title 2.md', as Obsidian names a second file
            dest_path = with_suffix_number(f"{folder}/{path}", n)
            dest = self.root / dest_path
            n += 1
        os.replace(source, dest)
        return dest_path

    def _temp_folder(self, folder: Path) -> Path:
        """Where the temp file of a write into ``folder`` goes: ``temp_dir`` when it is on the same
        file system (a link or rename cannot cross one; a folder may be a mount point), else ``folder``."""
        if self.temp_dir is None:
            return folder
        try:
            if self._temp_device is None:
                self.temp_dir.mkdir(mode=0o700, exist_ok=True)
                self._temp_device = self.temp_dir.stat().st_dev
            elif not self.temp_dir.is_dir():  # the index folder was wiped and made again
                self.temp_dir.mkdir(mode=0o700, exist_ok=True)
            return self.temp_dir if os.stat(folder).st_dev == self._temp_device else folder
        except OSError:  # no index folder (yet): beside the note
            return folder

    def _make_folders(self, folder: Path) -> None:
        """Create ``folder`` and missing parents, each with the mode of the folder it is made in
        (umask applies)."""
        if folder.is_dir():
            return
        missing = [folder, *(p for p in folder.parents if p != self.root and self.root in p.parents)]
        for each in reversed(missing):
            try:
                each.mkdir(mode=each.parent.stat().st_mode & 0o777)
            except FileExistsError:
                pass

    def remove_empty_folders(self, folder: str) -> list[str]:
        """Remove ``folder`` and then its parents while they are empty (never the vault root)."""
        removed: list[str] = []
        while folder and folder != ".":
            try:
                self.file(folder).rmdir()
            except OSError:  # not empty, gone, or not a folder
                break
            removed.append(folder)
            folder = folder.rsplit("/", 1)[0] if "/" in folder else ""
        return removed


def decode_note(path: str, data: bytes, st: os.stat_result) -> FileState:
    """The text of a note's bytes; ``InvalidInputError`` for binary or non-UTF-8 ones."""
    if b"\x00" in data[:8192]:
        raise InvalidInputError(f"{path} looks binary (it contains NUL bytes); not a note.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path} is not UTF-8 ({exc.reason} at byte {exc.start}); save it as UTF-8.") from exc
    return FileState(path, text, content_version(data), st.st_mtime_ns, st.st_size)
