"""Folders and files readable by their owner only: the index, the exports folder, the hooks' log
(docs/security.md, "Permissions"). Standard library only, so a hook can use it without loading the
vault's store."""

from __future__ import annotations

import os
import stat
from pathlib import Path


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
