"""The indexer: makes the catalog and the vector index equal to the vault.

``sync_paths`` brings a set of vault paths up to date (new, changed, deleted); ``reconcile``
does it for the whole vault, checking mtime/size first and the content hash only when they
moved. Work is batched: files are read and chunked per batch, new chunks are embedded in one
call, and each batch is committed on its own, so an interrupted first index resumes where it
stopped. A chunk whose exact content already has a vector (unchanged, renamed, moved) is never
embedded again.

When the embedder fails (a network endpoint down, a wrong key), a file is indexed anyway: its
catalog and keyword rows are written, and its new chunks are left without vectors. Those are
the catalog's chunk ids that the vector index lacks; ``missing`` holds them (computed afresh on
every reconcile, so a restart loses nothing), and ``fill_missing`` embeds them once the embedder
answers: at the end of each reconcile, and whenever the server retries (server/hub.py).
"""

from __future__ import annotations

import logging
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from spellbook.errors import (
    EmbedderError,
    EmbedderInputError,
    IndexUnavailableError,
    InvalidInputError,
    VaultPathError,
)
from spellbook.index.analysis import Prepared, analyse_note, embed_text
from spellbook.index.catalog import Catalog, ChunkRow, FileRow
from spellbook.index.rows import NoteRow
from spellbook.index.chunker import CHUNKER_VERSION
from spellbook.vault.crashpoints import crash_point
from spellbook.vault.paths import MAX_FILE_BYTES
from spellbook.vault.store import Vault, decode_note

log = logging.getLogger(__name__)

INDEX_FORMAT = "8"  # 3: CJK unigrams + bigrams in the keyword index; 4: tags table; 5: link relations;
# 6: expires/archived columns, folder notes; 7: user column (scopes); 8: session column
BATCH_FILES = 64
RECENTLY_REMOVED_MAX = 20_000  # vectors of removed chunks kept in memory for moves (about 40 MB at 512-d)
FILL_BATCH = 256  # chunks embedded per round when filling in missing vectors
PART_MIN = 16  # texts in each part of a batch embedded on several threads
REFUSED_IN_A_ROW = 3  # texts refused one by one before the endpoint counts as refusing everything

Progress = Callable[[int, int], None]


@dataclass
class SyncReport:
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0
    embedded_chunks: int = 0
    reused_chunks: int = 0
    problems: list[dict[str, str]] = field(default_factory=list)
    vectors_missing: int = 0  # chunks indexed for keyword search only: the embedder failed
    embedder_error: str | None = None

    def add(self, other: SyncReport) -> None:
        for name in ("indexed", "unchanged", "removed", "skipped", "embedded_chunks", "reused_chunks",
                     "vectors_missing"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems.extend(other.problems)
        self.embedder_error = other.embedder_error or self.embedder_error


class Indexer:
    def __init__(self, vault: Vault, catalog: Catalog, vectors: Any, embedder: Any, max_chunk_chars: int = 2_000):
        self.vault = vault
        self.catalog = catalog
        self.vectors = vectors
        self.embedder = embedder
        self.max_chunk_chars = max_chunk_chars
        self.lock = threading.RLock()  # one writer at a time: tools, watcher, reconcile
        self._recently_removed: OrderedDict[str, list[float]] = OrderedDict()
        self.missing: set[str] = set()  # chunk ids in the catalog without a vector (embedder failed)
        self.refused: set[str] = set()  # ...of which the endpoint refused the text (retried on reconcile)
        self._filling = threading.Lock()
        self._workers: ThreadPoolExecutor | None = None  # the other parts of a large batch (_embed)
        self._batch_ids: dict[str, str] = {}  # note id -> path, of the batch sync_paths is preparing
        self.closed = False

    def close(self) -> None:
        """Wait for the write under way (a reconcile batch, a tool's sync, a fill), then refuse
        new ones: the catalog and the vectors can then be closed without a batch being cut
        between its vectors and its catalog rows (an orphan vector a clean exit used to leave)."""
        with self.lock:
            self.closed = True
            if self._workers is not None:
                self._workers.shutdown()

    @contextmanager
    def _open_lock(self) -> Iterator[None]:
        with self.lock:
            if self.closed:
                raise IndexUnavailableError("The index is closing (the server is shutting down); retry after it restarts.")
            yield

    # --- identity -----------------------------------------------------------------------------
    def identity(self) -> dict[str, str]:
        return {
            "format": INDEX_FORMAT,
            "embedder": self.embedder.model_id,
            "chunker": f"{CHUNKER_VERSION}/{self.max_chunk_chars}",
        }

    def needs_rebuild(self) -> str | None:
        """Why the existing index cannot be trusted, or None."""
        stored = self.catalog.identity()
        if not stored:
            return "no index yet" if self.vectors.count() == 0 else "index has no identity"
        for key, value in self.identity().items():
            if stored.get(key) != value:
                return f"{key} changed ({stored.get(key)!r} -> {value!r})"
        return None

    def reset(self) -> None:
        with self.lock:
            self.vectors.reset()
            self.catalog.clear()
            self.missing.clear()
            self.refused.clear()
            self.catalog.set_identity(self.identity())

    # --- whole vault --------------------------------------------------------------------------
    def reconcile(self, progress: Progress | None = None) -> SyncReport:
        """Bring the index level with the vault: index new/changed files, drop deleted ones."""
        incomplete = self.catalog.incomplete_files()
        if incomplete:  # marked indexed with no note: treated as new files
            log.warning("re-indexing %d files whose index entry was incomplete", len(incomplete))
            with self._open_lock():
                self._remove(incomplete)
        known = self.catalog.files()
        on_disk = list(self.vault.iter_paths())
        candidates: list[str] = []
        report = SyncReport()
        for path in on_disk:
            row = known.get(path)
            try:
                st = self.vault.scan_stat(path)
            except OSError:
                continue
            if row is not None and row.mtime_ns == st.st_mtime_ns and row.size == st.st_size:
                report.unchanged += 1
            else:
                candidates.append(path)
        orphan_check = self._drop_orphan_vectors()
        if orphan_check:
            log.info("dropped %d vectors with no catalog entry", orphan_check)
        total = len(candidates)
        if progress:
            progress(0, total)
        for start in range(0, total, BATCH_FILES):
            report.add(self.sync_paths(candidates[start : start + BATCH_FILES]))
            if progress:
                progress(min(start + BATCH_FILES, total), total)
        # Deleted files go last, so a file that was moved reuses their vectors first.
        gone = sorted(set(known) - set(on_disk))
        with self._open_lock():
            report.removed += self._remove_missing(gone)
        filled = self.fill_missing()
        report.embedded_chunks += filled.embedded_chunks
        report.vectors_missing = filled.vectors_missing
        report.embedder_error = filled.embedder_error or report.embedder_error
        return report

    def _remove_missing(self, paths: list[str]) -> int:
        """Drop these paths from the index if they are still missing now (a checkout or pull may
        have brought them back since the scan); returns how many were dropped."""
        missing = [p for p in paths if not self._exists(p)]
        self._remove(missing)
        return len(missing)

    def _exists(self, path: str) -> bool:
        try:
            return self.vault.file(path).is_file()
        except VaultPathError:
            return False

    def _drop_orphan_vectors(self) -> int:
        """Vectors whose catalog rows never committed (a crash between the two) are removed;
        chunks without a vector (the embedder failed) are noted in ``missing``."""
        with self._open_lock():
            vector_ids, catalog_ids = self.vectors.ids(), self.catalog.all_chunk_ids()
            orphans = sorted(vector_ids - catalog_ids)
            if orphans:
                self.vectors.delete(orphans)
            self.missing = catalog_ids - vector_ids
            self.refused.clear()
        return len(orphans)

    def fill_missing(self) -> SyncReport:
        """Embed the chunks indexed without vectors, ``FILL_BATCH`` at a time, until none is left or
        the embedder fails again. Embeds outside the lock, so writes do not wait for it. A chunk the
        endpoint refuses (too long for the model...) is not asked for again until the next reconcile."""
        report = SyncReport()
        if not self._filling.acquire(blocking=False):
            return report  # another thread is at it
        try:
            queue = sorted(self.missing - self.refused)
            for start in range(0, len(queue), FILL_BATCH):
                with self.lock:
                    batch = [cid for cid in queue[start : start + FILL_BATCH] if cid in self.missing]
                    rows = self.catalog.chunks(batch)
                    notes = self.catalog.notes_at({r.path for r in rows.values()})
                    # removed since, or a chunk without its note (only a repair can fix that)
                    self.missing.difference_update(c for c in batch if c not in rows or rows[c].path not in notes)
                todo = [(cid, r) for cid, r in rows.items() if r.path in notes]
                if not todo:
                    continue
                embedded = self._embed([embed_text(notes[r.path].title, r.heading, r.text) for _, r in todo])
                with self._open_lock():  # keep only what is still current: a write may have replaced a chunk
                    now = self.catalog.chunks([cid for cid, _ in todo])
                    keep = [(cid, r, v) for (cid, r), v in zip(todo, embedded) if isinstance(v, list)
                            and cid in self.missing and cid in now and now[cid].digest == r.digest]
                    if keep:
                        ids, vectors = [k[0] for k in keep], [k[2] for k in keep]
                        self.vectors.upsert(ids, vectors, [{"path": k[1].path} for k in keep])
                    self.missing.difference_update(k[0] for k in keep)
                report.embedded_chunks += len(keep)
                failed = [(cid, v) for (cid, _), v in zip(todo, embedded) if not isinstance(v, list)]
                self.refused.update(cid for cid, v in failed if isinstance(v, EmbedderInputError))
                if failed:
                    report.embedder_error = str(failed[-1][1])
                if any(not isinstance(v, EmbedderInputError) for _, v in failed):
                    break  # down, or misconfigured: try again later
            if report.embedded_chunks:
                log.info("filled in %d missing vectors; %d still missing", report.embedded_chunks, len(self.missing))
        finally:
            self._filling.release()
        report.vectors_missing = len(self.missing)
        return report

    def _embed(self, texts: list[str]) -> list[list[float] | EmbedderError]:
        """A vector per text, or the error that kept it from one. A large batch is cut into as
        many parts of about equal length as the embedder may run at once (``parallel``), embedded
        on that many threads: the default model leaves the GIL for most of its work, so two parts
        take about the time of one on a 2-core machine."""
        parts = _parts(texts, getattr(self.embedder, "parallel", 1))
        if len(parts) == 1:
            return self._embed_part(texts)
        if self._workers is None:
            self._workers = ThreadPoolExecutor(max_workers=self.embedder.parallel - 1, thread_name_prefix="spellbook-embed")
        others = [self._workers.submit(self._embed_part, part) for part in parts[1:]]
        out = self._embed_part(parts[0])
        for future in others:
            out += future.result()
        return out

    def _embed_part(self, texts: list[str]) -> list[list[float] | EmbedderError]:
        """When the endpoint refuses a batch (HTTP 400...), its texts are tried one by one, so one
        text the model cannot take does not hold back the others; when the first few are all
        refused too, the endpoint refuses everything (a wrong model, unsupported dimensions): no
        text is blamed."""
        try:
            return [list(v) for v in self.embedder.embed_documents(texts)]
        except EmbedderInputError as exc:
            if len(texts) == 1:
                return [exc]
        except EmbedderError as exc:
            return [exc] * len(texts)
        out: list[list[float] | EmbedderError] = []
        for text in texts:
            (one,) = self._embed_part([text])
            out.append(one)
            if len(out) == REFUSED_IN_A_ROW and all(isinstance(v, EmbedderInputError) for v in out):
                return [EmbedderError(str(one))] * len(texts)
        return out

    # --- some paths ---------------------------------------------------------------------------
    def sync_paths(self, paths: Iterable[str]) -> SyncReport:
        """Index these vault paths as they are on disk now (deleted ones are dropped)."""
        report = SyncReport()
        with self._open_lock():
            prepared: list[Prepared] = []
            gone: list[str] = []
            self._batch_ids = {}
            for path in dict.fromkeys(paths):
                outcome = self._prepare(path, report)
                if outcome == "gone":
                    gone.append(path)
                elif isinstance(outcome, Prepared):
                    prepared.append(outcome)
                    if isinstance(outcome.note, NoteRow):
                        self._batch_ids.setdefault(outcome.note.note_id, path)
            if prepared:
                self._commit(prepared, report)
            if gone:  # after the commit, so a moved file reuses the vectors of its old path
                report.removed += self._remove_missing(gone)
        return report

    def sync_path(self, path: str) -> SyncReport:
        return self.sync_paths([path])

    def _prepare(self, path: str, report: SyncReport) -> Prepared | str | None:
        try:
            data, st = self.vault.read_bytes(path, max_bytes=MAX_FILE_BYTES)
        except (FileNotFoundError, NotADirectoryError):
            return "gone" if self.catalog.file(path) else None
        except (OSError, VaultPathError) as exc:
            return self._skip(path, 0, 0, f"cannot read: {exc}", report)
        if not stat.S_ISREG(st.st_mode):
            return "gone" if self.catalog.file(path) else None
        if data is None:
            why = f"too large ({st.st_size / 1e6:.1f} MB; notes over {MAX_FILE_BYTES // 2**20} MB are not indexed)"
            return self._skip(path, st.st_mtime_ns, st.st_size, why, report)
        try:
            state = decode_note(path, data, st)
        except InvalidInputError as exc:
            return self._skip(path, st.st_mtime_ns, st.st_size, str(exc), report)
        row = self.catalog.file(path)
        if row is not None and row.version == state.version and row.problem is None:
            self.catalog.touch(path, state.mtime_ns, state.size)
            report.unchanged += 1
            return None
        return self._analyse(path, state.text, state.version, state.mtime_ns, state.size)

    def _skip(self, path: str, mtime_ns: int, size: int, why: str, report: SyncReport) -> None:
        log.warning("skipped %s: %s", path, why)
        self._remove([path])
        self.catalog.replace(FileRow(path, None, mtime_ns, size, why), None, [])
        report.skipped += 1
        report.problems.append({"path": path, "problem": why})
        return None

    def _analyse(self, path: str, text: str, version: str, mtime_ns: int, size: int) -> Prepared:
        return analyse_note(path, text, version, mtime_ns, size, self.max_chunk_chars, self._holder_of)

    def _holder_of(self, note_id: str, path: str) -> str | None:
        """Another existing file that has this id already (so this one is a duplicate), if any:
        in the catalog, or earlier in the batch being indexed (two copies indexed together)."""
        earlier = self._batch_ids.get(note_id)
        if earlier is not None and earlier != path:
            return earlier
        for other in self.catalog.notes_by_id(note_id):
            if other.path != path and self.vault.file(other.path).exists():
                return other.path
        return None

    def _commit(self, prepared: list[Prepared], report: SyncReport) -> None:
        all_chunks = [(c, t) for p in prepared for c, t in zip(p.chunks, p.embed_texts)]
        reuse = self.catalog.chunk_ids_by_digest(c.row.digest for c, _ in all_chunks)
        known = self.vectors.vectors(sorted(set(reuse.values()))) if reuse else {}
        vectors: dict[str, list[float]] = {}
        to_embed: list[tuple[str, str]] = []
        for chunk, text in all_chunks:
            source = reuse.get(chunk.row.digest)
            if source in known:
                vectors[chunk.row.chunk_id] = known[source]
            elif chunk.row.digest in self._recently_removed:
                vectors[chunk.row.chunk_id] = self._recently_removed[chunk.row.digest]
            else:
                to_embed.append((chunk.row.chunk_id, text))
        if to_embed:
            embedded = self._embed([t for _, t in to_embed])
            done = {cid: vec for (cid, _), vec in zip(to_embed, embedded) if isinstance(vec, list)}
            vectors.update(done)
            report.embedded_chunks += len(done)
            errors = [e for e in embedded if not isinstance(e, list)]
            if errors:  # the files are indexed anyway; fill_missing embeds the rest later
                log.warning("indexed %d chunks without vectors: %s", len(errors), errors[-1])
                report.vectors_missing += len(errors)
                report.embedder_error = str(errors[-1])
        report.reused_chunks += len(all_chunks) - len(to_embed)
        # Vectors first, then the catalog: a crash in between leaves the file marked as not yet
        # indexed (the next reconcile redoes it) and at worst orphan vectors (dropped then).
        new_digests = {c.row.digest for c, _ in all_chunks}
        replaced = [r for p in prepared for r in self.catalog.chunks_of(p.file.path) if r.digest not in new_digests]
        if replaced:
            self._remember(replaced)
        new_ids = {c.row.chunk_id for c, _ in all_chunks}
        stale = [cid for p in prepared for cid in self.catalog.chunk_ids(p.file.path) if cid not in new_ids]
        if stale:
            self.vectors.delete(stale)
            self.missing.difference_update(stale)
        with_vectors = [c for c, _ in all_chunks if c.row.chunk_id in vectors]
        if with_vectors:
            ids = [c.row.chunk_id for c in with_vectors]
            # Chroma gets them in the background (searches see them at once); a crash before it
            # has them leaves them missing, and the next start embeds them again.
            self.vectors.upsert(ids, [vectors[i] for i in ids], [{"path": c.row.path} for c in with_vectors],
                                wait=False)
            self.missing.difference_update(ids)
            crash_point("vectors-written")
        if len(with_vectors) < len(all_chunks):
            self.vectors.delete([c.row.chunk_id for c, _ in all_chunks if c.row.chunk_id not in vectors])
            self.missing.update(c.row.chunk_id for c, _ in all_chunks if c.row.chunk_id not in vectors)
        self.catalog.replace_many((p.file, p.note, p.chunks) for p in prepared)
        for p in prepared:
            report.indexed += 1
            if p.file.problem:
                report.problems.append({"path": p.file.path, "problem": p.file.problem})

    def _remove(self, paths: list[str]) -> None:
        rows = [row for path in paths for row in self.catalog.chunks_of(path)]
        if rows:
            self._remember(rows)
            self.vectors.delete([r.chunk_id for r in rows])
            self.missing.difference_update(r.chunk_id for r in rows)
        self.catalog.remove(paths)

    def _remember(self, rows: list[ChunkRow]) -> None:
        """Keep the vectors of chunks about to be removed or replaced, for a while: a move often
        arrives as a delete in one batch and a create in the next (git checkout, Obsidian), and a
        checkout back restores old text; their chunks then reuse these instead of being embedded."""
        vectors = self.vectors.vectors([r.chunk_id for r in rows])
        for row in rows:
            if row.chunk_id in vectors:
                self._recently_removed[row.digest] = vectors[row.chunk_id]
                self._recently_removed.move_to_end(row.digest)
        while len(self._recently_removed) > RECENTLY_REMOVED_MAX:
            self._recently_removed.popitem(last=False)


def file_changed(vault: Vault, row: FileRow | None, path: str) -> bool:
    """True when the file at ``path`` is no longer what the catalog indexed (or is gone)."""
    try:
        st = vault.stat(path)
    except (OSError, VaultPathError):
        return True
    return row is None or row.mtime_ns != st.st_mtime_ns or row.size != st.st_size


def _parts(texts: list[str], parallel: int) -> list[list[str]]:
    """``texts`` cut in order into up to ``parallel`` runs of about equal characters, none under
    about ``PART_MIN`` texts."""
    count = max(1, min(parallel, len(texts) // PART_MIN))
    if count == 1:
        return [texts]
    total = sum(map(len, texts)) or 1
    parts: list[list[str]] = [[]]
    done = 0
    for text in texts:
        if done >= total * len(parts) / count and len(parts) < count and len(parts[-1]) >= PART_MIN:
            parts.append([])
        parts[-1].append(text)
        done += len(text)
    return parts
