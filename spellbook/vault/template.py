"""The starter vault shipped with Spellbook (``vault_template/``) and copying it."""

from __future__ import annotations

import contextlib
from pathlib import Path

from spellbook.errors import VaultPathError
from spellbook.vault.store import Vault


def template_dir() -> Path:
    """``spellbook/vault_template`` in an installed wheel, ``<repo>/vault_template`` in a checkout."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "vault_template", here.parent / "vault_template"):
        if candidate.is_dir():
            return candidate
    raise VaultPathError("The vault template is missing from this installation; reinstall Spellbook.")


def init_vault(target: Path) -> list[str]:
    """Copy the template into ``target`` without overwriting anything; returns the files added.
    A vault folder made here is private (0700), so the store makes its folders 0700 and its notes
    0600; an existing folder keeps its mode."""
    source = template_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        target.mkdir(mode=0o700)
    vault = Vault(target)
    added: list[str] = []
    for file in sorted(source.rglob("*")):
        rel = file.relative_to(source).as_posix()
        if file.is_dir() or vault.file(rel).exists():
            continue
        vault.create(rel, file.read_bytes().decode("utf-8"))
        added.append(rel)
    return added
