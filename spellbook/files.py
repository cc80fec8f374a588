"""Files written whole or not at all, and folders and files only their owner reads: every write of a
note, a setting, a client's config, a token, a ledger or a cache goes through here.

A write makes a unique dotfile temp (``.<name>.<random>.tmp``: concurrent writers never share one,
and the vault watcher and the stale-temp sweep know the shape), writes it, fsyncs it, renames it
over the target and fsyncs the folder, so a crash leaves the old file or the new one, never half
of one. Permissions (docs/security.md, "Writes and files"): a rewritten file keeps the mode it had;
a new file gets its folder's mode without the execute bits, limited by the umask (a 0700 folder
gives 0600 files, 0755 gives 0644), unless the caller names a mode (0600 for a private file).
Private folders are 0700 (docs/security.md, "Permissions").

Standard library only (and the ground floor's ``text`` and ``crashpoints``), so a hook can use it
without loading the vault; those and ``tempfile`` are imported when a write first needs them (an
agent hook that only makes a private folder loads none of them)."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

TEMP_NAME_BYTES = 200  # of the target's name kept in its temp file's name (255 - dots - 8 random - .tmp)
_UMASK = os.umask(0o022)  # read once, at import (before any thread), and put back
os.umask(_UMASK)


def atomic_write(
    target: Path, text: str | bytes, exclusive: bool = False, mode: int | None = None, temp_folder: Path | None = None
) -> bool:
    """Write ``text`` (or bytes, as they are) to ``target`` atomically (unique dotfile temp, fsync, rename). With
    ``exclusive``, never replace an existing file (returns False when the name is taken). ``mode``
    sets the file's permissions; without it a file that exists keeps its mode and a new one gets
    ``new_file_mode`` of its folder (the temp file is created 0600, then set). The temp file goes in
    ``temp_folder`` (on the target's file system), by default the target's own folder."""
    import tempfile

    from spellbook.crashpoints import crash_point

    mode = _mode_for(target, mode)
    fd, tmp = tempfile.mkstemp(dir=temp_folder or target.parent, prefix=temp_prefix(target.name), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text if isinstance(text, bytes) else text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        if exclusive:
            if not place(tmp, target):
                return False
        else:
            os.replace(tmp, target)
        fsync_dir(target.parent)
        crash_point("file-written")
        return True
    finally:
        Path(tmp).unlink(missing_ok=True)


@contextlib.contextmanager
def atomic_output(target: Path, mode: int | None = None) -> Iterator[BinaryIO]:
    """``atomic_write`` for a file written in pieces (a cache, a snapshot, an array to map): the
    block writes to the temp file it is given (open for reading and writing, so ``numpy.memmap``
    can map it); when the block ends normally the temp is fsynced and renamed over ``target``.
    When it raises, ``target`` is untouched and the temp is removed. ``mode`` as in ``atomic_write``."""
    import tempfile

    mode = _mode_for(target, mode)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=temp_prefix(target.name), suffix=".tmp")
    try:
        with os.fdopen(fd, "w+b") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            os.fchmod(f.fileno(), mode)
        os.replace(tmp, target)
        fsync_dir(target.parent)
    finally:
        Path(tmp).unlink(missing_ok=True)


def write_temp(target: Path, text: str, mode: int, folder: Path) -> str:
    """A new temp file for ``target`` in ``folder`` holding ``text`` with ``mode``, not yet synced
    (a batch syncs its temps together, then ``place``s each)."""
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=folder, prefix=temp_prefix(target.name), suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            os.fchmod(f.fileno(), mode)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def place(source: Path | str, target: Path) -> bool:
    """Put ``source``'s file at ``target`` unless that name is taken (False): a hard link, atomic and
    refused when the name exists (``source`` stays, for the caller to remove), or a rename on file
    systems without hard links."""
    try:
        os.link(source, target)
    except FileExistsError:
        return False
    except OSError:  # file systems without hard links
        if target.exists():
            return False
        os.replace(source, target)
    return True


def backup_copy(file: Path, mode: int | None = None) -> Path:
    """Copy ``file`` byte for byte (and its mode, or ``mode``) to ``<file>.bak``, or
    ``<file>.<YYYYmmdd-HHMMSS>[-n].bak`` when that is taken: never over an earlier backup, even one
    made the same second (``FileExistsError`` when a hundred were)."""
    from datetime import datetime

    data = file.read_bytes()
    mode = stat.S_IMODE(file.stat().st_mode) if mode is None else mode
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    names = [f"{file.name}.bak", f"{file.name}.{stamp}.bak", *(f"{file.name}.{stamp}-{i}.bak" for i in range(1, 100))]
    for name in names:
        try:
            fd = os.open(file.with_name(name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), mode)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return file.with_name(name)
    raise FileExistsError(f"Too many backups of {file} this second; delete old *.bak files next to it and retry.")


def new_file_mode(folder: Path) -> int:
    """The mode of a new file in ``folder``: the folder's read/write bits, limited by the umask."""
    return folder.stat().st_mode & 0o666 & ~_UMASK


def temp_prefix(name: str) -> str:
    """``.<name>.``, with a long name cut (by bytes, whole characters) so that the temp file's name
    fits in 255 bytes too; a note's temp keeps its ``.md.`` so stale ones are found."""
    if len(name.encode("utf-8")) <= TEMP_NAME_BYTES:
        return f".{name}."
    from spellbook.text import cut_utf8

    stem, dot, suffix = name.rpartition(".")
    if not dot or len(suffix) > 8:
        stem, suffix = name, ""
    return f".{cut_utf8(stem, TEMP_NAME_BYTES - len(suffix) - 1)}{'.' + suffix if suffix else ''}."


def fsync_dir(folder: Path) -> None:
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def private_folder(folder: Path) -> Path:
    """Create ``folder`` (and parents) for derived state that holds every note's text, readable by
    its owner only: 0700 when new; an existing one loses any group/other bits."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = folder.stat()
    if st.st_mode & 0o077 and st.st_uid == os.geteuid():
        os.chmod(folder, stat.S_IMODE(st.st_mode) & 0o700)
    return folder


def private_file(file: Path) -> Path:
    """Create ``file`` 0600 if missing (SQLite gives its -wal/-shm the same mode), or take
    group/other bits off an existing one."""
    fd = os.open(file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        if os.fstat(fd).st_mode & 0o077:
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)
    return file


def _mode_for(target: Path, mode: int | None) -> int:
    """``mode``, or the mode ``target`` has, or a new file's mode in its folder."""
    if mode is not None:
        return mode
    try:
        return stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        return new_file_mode(target.parent)
