"""What the commands share: settings from the flags, the hub (so the CLI never opens the index
under a running server), the progress bar."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from spellbook.config import settings_from
from spellbook.errors import SpellbookError

__all__ = ["ProgressBar", "open_hub", "running_owner", "settings_from"]


def open_hub(args: argparse.Namespace, progress: Any = None, embeds: bool = False):
    """The hub for a command; ``embeds``: the command will embed (an import, a first index), so the
    model starts loading as the index opens instead of at the first text."""
    from spellbook.server.hub import Hub

    settings = settings_from(args, watch=False)
    if not settings.vault_dir.is_dir():
        raise SpellbookError(f"No vault at {settings.vault_dir}; run `spellbook init {settings.vault_dir}` first.")
    # Otherwise the model loads only if something needs embedding.
    hub = Hub(settings, watch=False, warm_up=False, load_model=embeds, client="cli")
    hub.start(background=False, progress=progress)
    return hub


def running_owner(settings: Any) -> int | None:
    """Is a server running on this index? Returns its pid, or None."""
    from spellbook.server.hub import owner_pid

    return owner_pid(settings.index_path)


class ProgressBar:
    """Progress (an index, an import) on stderr, drawn by tqdm: redrawn in place on a terminal (at
    most 5 times a second), else a line every 10 seconds, so a log shows progress without a line
    per file. The bar appears once the work has run ``SHOW_AFTER`` seconds, or at its end: tqdm's
    import (20-40 ms) is then not in the way of the work's start."""

    SHOW_AFTER = 0.3

    def __init__(self, label: str, unit: str = "file") -> None:
        self.label = label
        self.unit = unit
        self._bar: Any = None
        self._since: float | None = None

    def __call__(self, done: int, total: int) -> None:
        if total == 0:
            return
        if self._bar is None:
            now = time.monotonic()
            self._since = now if self._since is None else self._since
            if done < total and now - self._since < self.SHOW_AFTER:
                return
            from tqdm import tqdm

            tty = sys.stderr.isatty()
            self._bar = tqdm(
                total=total,
                initial=done,
                desc=self.label,
                unit=self.unit,
                file=sys.stderr,
                dynamic_ncols=tty,
                mininterval=0.2 if tty else 10.0,
                ascii=not tty,
            )
        self._bar.total = total
        self._bar.update(done - self._bar.n)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.close()
