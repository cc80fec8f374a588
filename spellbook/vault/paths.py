"""Vault paths: naming files from titles, and the guard that keeps every path inside the vault.

Vocabulary: a ``path`` is always vault-relative POSIX (``projects/spellbook/Design.md``); a
``file`` is an absolute ``pathlib.Path``.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from pathlib import Path, PurePosixPath

from spellbook.defaults import INDEX_DIRNAME
from spellbook.errors import VaultPathError
from spellbook.text import cut_utf8

NOTE_SUFFIX = ".md"
MAX_FILE_BYTES = 5 * 1024 * 1024  # the largest note Spellbook indexes (and imports)
MAX_SEGMENT_CHARS = 80
# File systems allow 255 bytes a name. A note's name also carries ".md", then " 2"... when taken,
# and the store's temp file adds ".<name>.<8 random>.tmp": 200 bytes of title leaves room for all.
MAX_SEGMENT_BYTES = 200

# Folders that are never notes: tool state, Obsidian's config and trash, git.
IGNORED_DIRS = frozenset({".git", ".obsidian", ".trash", INDEX_DIRNAME, "node_modules", ".stfolder"})
# Expired memories move here (same relative path); still notes, indexed, hidden unless asked for.
ARCHIVE_DIR = "_archive"
# Folder notes: a description a person (or `describe`) writes, and a generated map of content.
# Neither is a memory: the indexer records them, but never as searchable notes.
ABOUT_NAME = "_about.md"
OVERVIEW_NAME = "_overview.md"

_WINDOWS_RESERVED = frozenset(
    {"con", "prn", "aux", "nul"} | {f"com{i}" for i in range(1, 10)} | {f"lpt{i}" for i in range(1, 10)}
)
# Characters Windows, macOS or Obsidian links cannot carry in a file name.
_UNSAFE = re.compile(r'[<>:"/\\|?*\x00-\x1f\x7f#^\[\]]')
_SPACES = re.compile(r"\s+")


def sanitize_segment(text: str, fallback: str = "untitled") -> str:
    """Turn free text into one safe, human-readable path segment (no separators, no dots first)."""
    name = unicodedata.normalize("NFC", text)
    name = _UNSAFE.sub(" ", name)
    name = _SPACES.sub(" ", name).strip().lstrip(". ")
    if len(name) > MAX_SEGMENT_CHARS:
        name = cut_utf8(name, len(name[:MAX_SEGMENT_CHARS].encode("utf-8"))).rstrip()
    if len(name.encode("utf-8")) > MAX_SEGMENT_BYTES:
        name = cut_utf8(name, MAX_SEGMENT_BYTES).rstrip()
    name = name.rstrip(". ")  # Windows drops trailing dots and spaces
    if not name or name.split(".")[0].lower() in _WINDOWS_RESERVED:
        name = f"{name} note".strip() if name else fallback
    return name


def is_ignored(path: str) -> bool:
    """True for paths Spellbook never treats as notes (tool folders, dotfiles, temp files)."""
    parts = PurePosixPath(path).parts
    if any(part in IGNORED_DIRS for part in parts[:-1]):
        return True
    if any(part.startswith(".") for part in parts):
        return True  # hidden files and folders, including our own .name.tmp files
    name = parts[-1] if parts else ""
    return not name.endswith(NOTE_SUFFIX) or name.endswith("~") or name.startswith("~$")


def is_folder_note(path: str) -> bool:
    """True for ``_about.md`` / ``_overview.md`` files: they describe a folder, they are not memories."""
    return PurePosixPath(path).name in (ABOUT_NAME, OVERVIEW_NAME)


def is_archived(path: str) -> bool:
    return path == ARCHIVE_DIR or path.startswith(ARCHIVE_DIR + "/")


def to_path(vault: Path, file: Path) -> str:
    """The vault-relative POSIX path of an absolute file inside the vault."""
    try:
        return file.relative_to(vault).as_posix()
    except ValueError as exc:
        raise VaultPathError(f"{file} is outside the vault {vault}.") from exc


def resolve_path(vault: Path, path: str) -> Path:
    """The absolute file for a vault-relative path; refuses anything that would leave the vault.
    Every read and write comes here: strings and ``os.path`` rather than ``PurePosixPath``, and
    an lstat of each part below the vault rather than realpath (64 -> 14 us)."""
    if not path or "\x00" in path:
        raise VaultPathError("Empty or invalid path. Pass a vault-relative path like 'topic/note.md'.")
    posix = path.replace("\\", "/")
    parts = [part for part in posix.split("/") if part not in ("", ".")]
    if posix.startswith("/") or ".." in parts or _DRIVE.match(path):
        raise VaultPathError(f"Path {path!r} is not inside the vault. Pass a vault-relative path without '..'.")
    root = str(vault)
    file = os.path.join(root, *parts)
    if _has_symlink(root, parts):  # it may point outside: check where it leads
        real = os.path.realpath(file)
        if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
            raise VaultPathError(f"Path {path!r} resolves outside the vault; refusing to touch it.")
    return Path(file)


def _has_symlink(root: str, parts: list[str]) -> bool:
    return first_symlink(root, parts) is not None


def first_symlink(root: str, parts: list[str]) -> str | None:
    """The first part of ``root/parts...`` below ``root`` (a resolved vault folder) that is a
    symlink, as a vault-relative path, or None: lstat from the root down, stopping at the first
    part that does not exist (nothing under it does). The vault's own parents are not looked at
    again, which was half of realpath's time."""
    current = root
    for n, part in enumerate(parts):
        current = os.path.join(current, part)
        try:
            mode = os.lstat(current).st_mode
        except OSError:
            return None
        if stat.S_ISLNK(mode):
            return "/".join(parts[: n + 1])
    return None


_DRIVE = re.compile(r"^[A-Za-z]:")


def note_path(category: str | None, topic: str | None, title: str) -> str:
    """Where a new memory goes: ``<category>/<topic>/<title>.md``, every segment sanitised."""
    parts = [sanitize_segment(category or "general", "general")]
    if topic:
        parts.append(sanitize_segment(topic, "misc"))
    parts.append(sanitize_segment(title) + NOTE_SUFFIX)
    return "/".join(parts)


def with_suffix_number(path: str, n: int) -> str:
    """``a/Title.md`` -> ``a/Title 2.md``: Obsidian's own way of naming a second file."""
    stem = path[: -len(NOTE_SUFFIX)]
    return f"{stem} {n}{NOTE_SUFFIX}"
