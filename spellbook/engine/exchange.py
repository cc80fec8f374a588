"""Export and import: what the ``export`` and ``import`` tools do (formats: docs/export.md).

A service of the engine, given the vault, catalog, indexer, git committer, settings and the
privacy filter (``Access``).
Export reads every matching note from disk (the catalog only says which). Import validates the
whole file before it writes anything, then writes through the vault store (new files with
``create``, which never replaces a file; replacements with a version-checked ``write``) and
indexes what it wrote by reading it back, as ``scribe`` does.
"""

from __future__ import annotations

import json
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath
from queue import Queue
from typing import TYPE_CHECKING, Any

from spellbook.config import Settings
from spellbook.engine.access import Access, Readiness
from spellbook.engine.activity import ActivityLog
from spellbook.engine.formats.mcp_memory import looks_like_memory_graph, memory_graph_entries
from spellbook.engine.formats.spellbook_export import (
    Entry,
    ExportFormat,
    ImportFormat,
    OnConflict,
    export_document,
    markdown_document,
    own_id,
    read_export,
    refuse_if,
    scrub_entries,
)
from spellbook.engine.import_run import Created, ImportProgress, ImportRun
from spellbook.errors import InvalidInputError, SpellbookError, VaultPathError
from spellbook.git.committer import Change, Committer
from spellbook.index.catalog import Catalog
from spellbook.index.claims import with_folders
from spellbook.index.filters import parse_filter
from spellbook.index.indexer import Indexer, Progress
from spellbook.vault.exports import ExportPlaces, check_import_source, resolve_export_target, write_export
from spellbook.vault.fields import derived_id, new_id
from spellbook.vault.note import now_iso, parse_note, render_note
from spellbook.vault.paths import with_suffix_number
from spellbook.vault.privacy import describe
from spellbook.vault.store import Vault
from spellbook.version import __version__

if TYPE_CHECKING:
    from spellbook.index.filter_model import Filter

EXPORTS_DIR = "exports"  # relative export/import paths live in <index dir>/exports/
INLINE_EXPORT_CHARS = 100_000  # larger exports must go to a file (path=...)
MAX_IMPORT_BYTES = 200 * 2**20
REPORT_ITEMS = 100  # per list in an import report; counts are always complete
IMPORT_BATCH = 128  # files indexed together while the next ones are written
FIRST_BATCH = 16  # ...doubling up to IMPORT_BATCH: the model starts on the first files at once
LAST_BATCH = 32  # ...and halving down to this at the end (batch_size)


class Exchange:
    """Export to a file or inline, and import from a Spellbook export or an MCP memory graph."""

    def __init__(
        self,
        settings: Settings,
        vault: Vault,
        catalog: Catalog,
        indexer: Indexer,
        git: Committer,
        access: Access,
        readiness: Readiness,
        activity: ActivityLog | None = None,
    ) -> None:
        self.settings = settings
        self.activity = activity
        self.vault = vault
        self.catalog = catalog
        self.indexer = indexer
        self.git = git
        self.access = access
        self.readiness = readiness

    def export(
        self,
        format: ExportFormat = "json",
        path: str | None = None,
        filter: Filter | dict | None = None,
        overwrite: bool = False,
    ) -> dict[str, Any]:
        if format not in ("json", "markdown"):
            raise InvalidInputError("format must be json or markdown.")
        spec = parse_filter(filter)
        places = ExportPlaces(
            self.settings.index_path,
            self.vault.root,
            tuple(p.expanduser().resolve() for p in self.settings.export_dirs),
        )
        target = resolve_export_target(path, places, overwrite) if path is not None else None
        pending = self.readiness.await_first_index()
        where, params = self.access.where(spec, include_hidden=True)  # archived and expired memories too: loss-free
        rows, _ = self.catalog.list_notes(where, params, 1 << 62, 0)
        entries: list[Entry] = []
        unreadable: list[str] = []
        kinds: list[str] = []
        for row in sorted(rows, key=lambda r: r.path):
            try:
                parsed = parse_note(self.vault.read(row.path).text)
            except (OSError, SpellbookError):
                unreadable.append(row.path)
                continue
            body, found = self.access.scrub(parsed.body)
            meta, more = self.access.scrub_data(parsed.meta)
            kinds += [r.kind for r in found] + more
            note_id = own_id(meta) or row.note_id
            entries.append(Entry(row.path, note_id, row.path, row.title, meta, body))
        exported = now_iso()
        scope = spec.model_dump(exclude_none=True) if spec else None
        if format == "json":
            document: Any = export_document(entries, exported, __version__, scope)
            text = json.dumps(document, ensure_ascii=False, indent=2) + "\n"
        else:
            document = text = markdown_document(entries, exported, scope)
        out: dict[str, Any] = {"format": format, "count": len(entries), "exported": exported}
        if unreadable:
            out["unreadable"] = unreadable[:50]
        if pending:
            out["note"] = pending
        if kinds:
            out["redacted"] = describe(kinds)
        if target is not None:
            return {**out, "path": str(target), "bytes": write_export(target, text, places, overwrite)}
        if len(text) > INLINE_EXPORT_CHARS:
            raise InvalidInputError(
                f"The export is {len(text):,} characters, over the {INLINE_EXPORT_CHARS:,} returned inline. Pass "
                f"path (e.g. 'memories.json', written to {self._exports_dir()}/) to write it to "
                "a file, or narrow it with filter."
            )
        return {**out, "content": document}

    def import_memories(
        self,
        path: str,
        format: ImportFormat = "auto",
        on_conflict: OnConflict = "skip",
        dry_run: bool = False,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Import an export file. ``progress(done, total)``, for a caller in this process (the CLI's
        bar): the memories handled so far, a written one once its batch is indexed."""
        if progress is not None and not callable(progress):
            raise InvalidInputError("progress is a callback for callers in the server's own process.")
        if format not in ("auto", "json", "mcp-memory"):
            raise InvalidInputError("format must be auto, json (a Spellbook export) or mcp-memory (memory.jsonl).")
        if on_conflict not in ("skip", "overwrite", "new_id"):
            raise InvalidInputError("on_conflict must be skip, overwrite or new_id.")
        file = self._exchange_file(path)
        text = _read_import_file(file)
        if format == "auto":
            format = "mcp-memory" if looks_like_memory_graph(text) else "json"
        warnings: list[str] = []
        if format == "mcp-memory":
            entries, warnings = memory_graph_entries(text, f"{file.name} (MCP memory server)", now_iso())
        else:
            entries = read_export(text, str(file))  # one memory at a time; bounded count and depth
        entries, named_kinds = scrub_entries(
            entries, self.access.scrub, self.access.may_hold_secrets
        )  # no secret in a file name or an id
        problems = []
        for entry in entries:
            try:
                self.vault.file(entry.path)  # the vault's own guard: no '..', no symlink out of the vault
            except VaultPathError as exc:
                problems.append(f"{entry.where} (id {entry.id!r}): {exc}")
        refuse_if(problems, len(entries))

        self.readiness.await_first_index()
        run = ImportRun(on_conflict, dry_run)
        run.kinds += named_kinds
        tick = ImportProgress(progress, len(entries))
        # Batches are indexed in a thread while the next ones are written, each embedded (on the
        # embedder's `parallel` threads) while the one before it is written to the index.
        # The paths are claimed from before their write until their batch is indexed, so the
        # watcher does not index them too (index/claims.py).
        batches: Queue[list[str] | None] = Queue()
        queued: deque[list[str]] = deque()

        def indexed_one(done: int) -> None:  # sync_batches reports each batch, in order, once written
            run.hold.release(queued.popleft())
            tick.indexed(done)

        def send(batch: list[str]) -> None:
            queued.append(batch)
            batches.put(batch)

        with (
            self.indexer.claims.hold() as run.hold,
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="spellbook-import") as indexing,
        ):
            indexed = indexing.submit(self.indexer.sync_batches, iter(batches.get, None), indexed_one)
            sent = count = 0
            try:
                for place, entry in enumerate(entries, 1):
                    try:
                        self._import_entry(entry, run)
                    except (SpellbookError, OSError) as exc:
                        run.failed(entry, exc)
                    tick.read(len(run.written) + len(run.new))
                    waiting = len(run.written) + len(run.new) - sent
                    if waiting >= batch_size(waiting + len(entries) - place, min(IMPORT_BATCH, FIRST_BATCH << count)):
                        self._create_new(run)
                        send(run.written[sent:])
                        sent, count = len(run.written), count + 1
                self._create_new(run)
                if len(run.written) > sent:
                    send(run.written[sent:])
            finally:
                batches.put(None)
            indexed.result()
        if progress is not None:
            progress(len(entries), len(entries))
        if run.written:
            self._commit_import(file, run)
        out: dict[str, Any] = {
            "file": str(file),
            "format": format,
            "on_conflict": on_conflict,
            "dry_run": dry_run,
            "total": len(entries),
            "counts": {k: len(v) for k, v in run.lists.items()},
        }
        for name, items in run.lists.items():
            out[name] = items[:REPORT_ITEMS]
        if any(len(v) > REPORT_ITEMS for v in run.lists.values()):
            out["truncated"] = f"each list shows its first {REPORT_ITEMS}; counts are complete"
        if warnings:
            out["warnings"] = warnings[:50]
        if run.kinds:
            out["redacted"] = describe(run.kinds)
        return out

    # --- helpers ------------------------------------------------------------------------------
    def _commit_import(self, file: Path, run: ImportRun) -> None:
        """One commit for everything an import wrote (in a git vault with commits on), and a line
        for each memory in the activity log: the texts and fields as written, not read back."""
        if not self.git.enabled and self.activity is None:
            return
        files: dict[str, bytes | None] = {path: text.encode("utf-8") for path, text in run.texts.items()}
        activity = self.activity
        lines = (
            [activity.entry("import", path, None, "", f"from {file.name}", meta=run.metas[path]) for path in files]
            if activity is not None
            else []
        )

        def log(change: Change | None) -> None:
            commit = change.result.get("commit") if change is not None else None
            if activity is not None:
                activity.append_many([{**line, "commit": commit} for line in lines])

        if not self.git.enabled:
            log(None)
        elif files:
            self.git.submit(Change("import", files, f"{len(files)} memories from {file.name}", "", on_done=log))

    def _import_entry(self, entry: Entry, run: ImportRun) -> None:
        body, found = self.access.scrub(entry.body)
        meta, more = self.access.scrub_data(entry.meta)
        kinds = [r.kind for r in found] + more
        existing = run.seen.get(entry.id) or self._path_of_id(entry.id)
        if existing is not None and run.on_conflict == "skip":
            run.record("skipped", entry, existing, reason=f"id exists at {existing}")
            return
        if existing is not None and run.on_conflict == "overwrite":
            if run.dry_run and existing in run.claimed:  # an earlier entry of this file, not written
                run.record("overwritten", entry, existing)
                return
            state = self.vault.read(existing)
            meta = _with_id(meta, entry.id, existing)
            if entry.stamped:  # made-up timestamps: keep the note's own, so an unchanged entity stays unchanged
                own = parse_note(state.text).meta
                meta = {**meta, **{k: own[k] for k in ("created", "updated") if k in own}}
                if _note_text(meta, body) != state.text:
                    meta["updated"] = now_iso()
            text = _note_text(meta, body)
            current = parse_note(state.text)
            if text == state.text or (current.meta, current.body) == (meta, body):  # keep the file's own bytes
                run.record("unchanged", entry, existing)
                return
            if not run.dry_run:
                run.hold.add([existing])
                self.vault.write(existing, text, expected_version=state.version)  # never clobbers a newer edit
                run.wrote(existing, text, meta)
            run.kinds += kinds
            run.record("overwritten", entry, existing)
            return
        note_id = entry.id
        if existing is not None:  # new_id
            note_id = new_id()
            meta = {**meta, "id": note_id}
        path = self._free_path(entry.path, run.claimed)
        meta = _with_id(meta, note_id, path)
        run.claimed.add(path)
        run.seen.setdefault(entry.id, path)
        created = Created(entry, path, _note_text(meta, body), meta, note_id, kinds)
        if run.dry_run:
            run.created(created, path)
        else:  # written with the others of its batch (``_create_new``)
            run.new.append(created)

    def _create_new(self, run: ImportRun) -> None:
        """Write the new notes waiting in ``run``: one sync for the batch, not one per file."""
        if not run.new:
            return
        run.hold.add(with_folders(c.path for c in run.new))  # the folders too: create_many may make them
        paths = self.vault.create_many([(c.path, c.text) for c in run.new])
        for created, path in zip(run.new, paths):
            if isinstance(path, str):
                if path != created.path:  # a file took its name meanwhile: written at a free one
                    run.hold.add([path])
                run.wrote(path, created.text, created.meta)
                run.created(created, path)
            else:  # its id stays taken for the rest of the file: importing it again writes it
                run.failed(created.entry, path)
        run.new = []

    def _path_of_id(self, note_id: str) -> str | None:
        for row in self.catalog.notes_by_id(note_id):
            if self.vault.file(row.path).is_file():
                return row.path
        return None

    def _free_path(self, path: str, claimed: set[str]) -> str:
        n, candidate = 2, path
        while candidate in claimed or self.vault.file(candidate).exists():
            candidate, n = with_suffix_number(path, n), n + 1
        return candidate

    def _exports_dir(self) -> Path:
        return self.settings.index_path / EXPORTS_DIR

    def _exchange_file(self, path: str | None) -> Path:
        """The file an import comes from: an absolute path, or a path relative to
        ``<index dir>/exports/`` (never ``..`` out of it). Exports: spellbook/vault/exports.py."""
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            raise InvalidInputError("path is empty: pass a file name like 'memories.json' or an absolute path.")
        given = Path(path.strip()).expanduser()
        if given.is_absolute():
            file = given.resolve()
        else:
            base = self._exports_dir()
            if ".." in PurePosixPath(path.replace("\\", "/")).parts:
                raise InvalidInputError(
                    f"Relative paths are files in {base}; '..' is not allowed. Pass an absolute path instead."
                )
            file = (base / given).resolve()
        check_import_source(file)
        if not file.is_file():
            raise InvalidInputError(
                f"No file at {file}. Pass the path of an export (absolute, or in {self._exports_dir()})."
            )
        return file


def batch_size(left: int, size: int) -> int:
    """How many of the ``left`` memories an import's next batch takes, batches running at ``size``.
    The last ones halve, down to LAST_BATCH: the embedding processes share each batch out in parts
    and stop together only when the parts are small, and nothing overlaps the last batch's writes.
    A 1,000-note import ends 124, 62, 62 instead of 128, 120: its two processes end 0.04 s apart on
    average instead of 0.07, and the writes after its last vectors take 0.035 s instead of 0.06."""
    if left < 2 * LAST_BATCH:
        return left
    return min(size, (left + 1) // 2)


def _with_id(meta: dict[str, Any], note_id: str, path: str) -> dict[str, Any]:
    """``meta`` with the id written in, unless the note keeps its identity without it (a
    hand-written note at the path its derived id comes from)."""
    if own_id(meta) or note_id == derived_id(path):
        return meta
    return {**meta, "id": note_id}


def _note_text(meta: dict[str, Any], body: str) -> str:
    """The file for a note: a note that had no frontmatter gets none (its file is its body)."""
    return render_note(meta, body) if meta else body


def _read_import_file(file: Path) -> str:
    size = file.stat().st_size
    if size > MAX_IMPORT_BYTES:
        raise InvalidInputError(
            f"{file} is {size / 2**20:.0f} MB; the largest import is {MAX_IMPORT_BYTES // 2**20} MB."
        )
    data = file.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{file} is not UTF-8 ({exc.reason} at byte {exc.start}).") from None
