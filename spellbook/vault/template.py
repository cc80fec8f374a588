"""The starter vault shipped with Spellbook (``vault_template/``) and copying it."""

from __future__ import annotations

import shutil
from pathlib import Path

from spellbook.errors import VaultPathError


def template_dir() -> Path:
    """``spellbook/vault_template`` in an installed wheel, ``<repo>/vault_template`` in a checkout."""
    here = Path(__file__).resolve().parent.parent
    for candidate in (here / "vault_template", here.parent / "vault_template"):
        if candidate.is_dir():
            return candidate
    raise VaultPathError("The vault template is missing from this installation; reinstall Spellbook.")


def init_vault(target: Path) -> list[str]:
    """Copy the template into ``target`` without overwriting anything; returns the files added."""
    source = template_dir()
    target.mkdir(parents=True, exist_ok=True)
    added: list[str] = []
    for file in sorted(source.rglob("*")):
        if file.is_dir():
            continue
        rel = file.relative_to(source)
        dest = target / rel
        if dest.exists():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(file, dest)
        added.append(rel.as_posix())
    return added
