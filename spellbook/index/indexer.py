"""The indexer: makes the catalog and the vector index equal to the vault.

``sync_paths`` brings a set of vault paths up to date (new, changed, deleted); ``reconcile``
does it for the whole vault, checking mtime/size first and the content hash only when they
moved. Work is batched: files are read and chunked per batch, new chunks are embedded in one
call, and each batch is committed on its own, so an interrupted first index resumes where it
stopped. A chunk whose exact content already has a vector (unchanged, renamed, moved) is never
embedded again. ``sync_batches`` (a first index, an import) embeds each batch while the one
before it is written and the next one read, so the model does not wait for Spellbook's own work.

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
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from itertools import chain
from typing import Any

import numpy as np

from spellbook.crashpoints import crash_point
from spellbook.errors import EmbedderInputError, IndexUnavailableError, InvalidInputError, VaultPathError
from spellbook.index.analysis import Prepared, analyse_note, embed_text, embed_texts
from spellbook.index.catalog import Catalog, ChunkRow, FileRow
from spellbook.index.chunker import CHUNKER_VERSION, MAX_CHUNK_CHARS
from spellbook.index.claims import Claims
from spellbook.index.embedding import BatchEmbedder, Vectors
from spellbook.index.report import SyncReport
from spellbook.index.rows import NoteRow, file_changed  # file_changed: imported from here too
from spellbook.vault.paths import MAX_FILE_BYTES
from spellbook.vault.store import Vault, decode_note

log = logging.getLogger(__name__)

INDEX_FORMAT = "9"  # 3: CJK unigrams + bigrams in the keyword index; 4: tags table; 5: link relations;
# 6: expires/archived columns, folder notes; 7: user column (scopes); 8: session column; 9: a note without
# a frontmatter title is named by its file name, a hand-filed note's second folder is its topic,
# `[[Note\|shown]]` links to Note, links to attachments (images, PDF, canvas...) are not memory links
BATCH_FILES = 64
RECENTLY_REMOVED_MAX = 20_000  # vectors of removed chunks kept in memory for moves (42 MB at 512-d)
FILL_BATCH = 256  # chunks embedded per round when filling in missing vectors

Progress = Callable[[int, int], None]


@dataclass
class StagedBatch:
    """A batch read and analysed, its vectors reused or being embedded (``Indexer._stage``)."""

    size: int  # paths in the batch
    report: SyncReport
    prepared: list[Prepared]
    gone: list[str]
    chunks: list[tuple[Any, str]]  # (IndexedChunk, the text embedded for it)
    vectors: dict[str, list[float]]  # chunk id -> the vector it reuses
    to_embed: list[tuple[str, str]]  # (chunk id, text) for the model
    embedded: Callable[[], Vectors] | None = None  # waits for the vectors of ``to_embed``


class Indexer:
    def __init__(
        self,
        vault: Vault,
        catalog: Catalog,
        vectors: Any,
        embedder: Any,
        max_chunk_chars: int = MAX_CHUNK_CHARS,
        embed_processes: bool | None = None,
    ):
        self.vault = vault
        self.catalog = catalog
        self.vectors = vectors
        self.embedder = embedder
        self.max_chunk_chars = max_chunk_chars
        self.lock = threading.RLock()  # one writer at a time: tools, watcher, reconcile
        self._recently_removed: OrderedDict[str, np.ndarray] = OrderedDict()  # digest -> float32 row
        self.missing: set[str] = set()  # chunk ids in the catalog without a vector (embedder failed)
        self.refused: set[str] = set()  # ...of which the endpoint refused the text (retried on reconcile)
        self._filling = threading.Lock()
        self.batches = BatchEmbedder(embedder, embed_processes)
        self.claims = Claims()  # paths a writer indexes itself (an import): the watcher leaves them to it
        self.closed = False

    def close(self) -> None:
        """Wait for the write under way (a reconcile batch, a tool's sync, a fill), then refuse
        new ones: the catalog and the vectors can then be closed without a batch being cut
        between its vectors and its catalog rows (an orphan vector a clean exit used to leave)."""
        with self.lock:
            self.closed = True
            self.batches.close()

    def confirm_stored(self) -> None:
        """Once the vector index is closed with nothing left behind: clear this session's marks
        (index/pending.py), but for the files whose chunks still wait for a vector."""
        if not self.vectors.behind():
            self.catalog.pending.settle(mine=True, keep=self._paths_of(self.missing))

    def _paths_of(self, chunk_ids: set[str]) -> set[str]:
        return {row.path for row in self.catalog.chunks(sorted(chunk_ids)).values()}

    @contextmanager
    def _open_lock(self) -> Iterator[None]:
        with self.lock:
            if self.closed:
                raise IndexUnavailableError(
                    "The index is closing (the server is shutting down); retry after it restarts."
                )
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
            elif path not in self.claims:  # a claimed file is its writer's to index (index/claims.py)
                candidates.append(path)
        orphan_check = self._drop_orphan_vectors()
        if orphan_check:
            log.info("dropped %d vectors with no catalog entry", orphan_check)
        total = len(candidates)
        if progress:
            progress(0, total)
        batches = (candidates[start : start + BATCH_FILES] for start in range(0, total, BATCH_FILES))
        report.add(self.sync_batches(batches, (lambda done: progress(done, total)) if progress else None))
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
            self.catalog.pending.settle(mine=False, keep=self._paths_of(self.missing))  # dead sessions' marks
        return len(orphans)

    def fill_missing(self) -> SyncReport:
        """Embed the chunks indexed without vectors, ``FILL_BATCH`` at a time, until none is left or
        the embedder fails again. Embeds outside the lock, so writes do not wait for it. A chunk the
        endpoint refuses (too long for the model...) is not asked for again until the next reconcile."""
        report = SyncReport()
        if not self._filling.acquire(blocking=False):
            return report  # another thread is at it
        try:
            with self.batches.bulk(), self.vectors.bulk():
                self._fill(report)
        finally:
            self._filling.release()
        if report.embedded_chunks:
            log.info("filled in %d missing vectors; %d still missing", report.embedded_chunks, len(self.missing))
        report.vectors_missing = len(self.missing)
        return report

    def _fill(self, report: SyncReport) -> None:
        """``fill_missing``'s rounds (the lock for each, the model outside it)."""
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
            embedded = self.batches.embed([embed_text(notes[r.path].title, r.heading, r.text) for _, r in todo])
            with self._open_lock():  # keep only what is still current: a write may have replaced a chunk
                now = self.catalog.chunks([cid for cid, _ in todo])
                keep = [
                    (cid, r, v)
                    for (cid, r), v in zip(todo, embedded)
                    if isinstance(v, list) and cid in self.missing and cid in now and now[cid].digest == r.digest
                ]
                if keep:
                    ids, vectors = [k[0] for k in keep], [k[2] for k in keep]
                    self.vectors.upsert(ids, vectors)
                self.missing.difference_update(k[0] for k in keep)
            report.embedded_chunks += len(keep)
            failed = [(cid, v) for (cid, _), v in zip(todo, embedded) if not isinstance(v, list)]
            self.refused.update(cid for cid, v in failed if isinstance(v, EmbedderInputError))
            if failed:
                report.embedder_error = str(failed[-1][1])
            if any(not isinstance(v, EmbedderInputError) for _, v in failed):
                break  # down, or misconfigured: try again later

    # --- some paths ---------------------------------------------------------------------------
    def sync_paths(self, paths: Iterable[str]) -> SyncReport:
        """Index these vault paths as they are on disk now (deleted ones are dropped)."""
        with self._open_lock():
            return self._finish(self._stage(paths, {}, now=True))

    def sync_path(self, path: str) -> SyncReport:
        return self.sync_paths([path])

    def expect(self, path: str, text: str) -> None:
        """A tool is about to write ``text`` at ``path``: the vectors of its new chunks start now, on
        the embedder's own thread, while the file is written, synced and read back (``sync_path``
        takes them if the file holds that text then; else they are dropped later)."""
        pairs = embed_texts(path, text, self.max_chunk_chars)
        known = self.catalog.chunk_ids_by_digest(digest for digest, _ in pairs)  # reused, not embedded
        self.batches.ahead([t for digest, t in pairs if digest not in known and digest not in self._recently_removed])

    def sync_batches(self, batches: Iterable[list[str]], done: Callable[[int], None] | None = None) -> SyncReport:
        """``sync_paths`` for each batch in turn, each batch embedded while the one before it is
        written and the next one read: the model's threads do not wait for Spellbook's own work
        between batches (a first index, an import). Other writers take their turns between the
        steps; a file that changed on disk between its reading and its writing is indexed again
        at the end. ``done(n)`` after each batch, with the paths done so far."""
        report = SyncReport()
        ids: dict[str, str] = {}  # note id -> path, over every batch not yet written
        again: list[str] = []
        pending: list[StagedBatch] = []
        finished = 0
        with self.batches.bulk(), ExitStack() as gathering:  # parts to child processes where the model allows it
            gathering.enter_context(self.vectors.bulk())  # vectors in fewer writes until the last batch is in
            for paths in chain(batches, [None]):
                if paths is None:
                    gathering.close()
                else:
                    with self._open_lock():
                        pending.append(self._stage(paths, ids, now=False))
                if len(pending) == 2 or (paths is None and pending):
                    staged = pending.pop(0)
                    report.add(self._finish_later(staged, again))
                    finished += staged.size
                    if done is not None:
                        done(finished)
        if again:
            report.add(self.sync_paths(again))
        return report

    def _stage(self, paths: Iterable[str], ids: dict[str, str], now: bool) -> StagedBatch:
        """Read and analyse the files, find the vectors their chunks can reuse and embed the
        others: ``now`` (in this thread, once ``_commit`` has written the catalog rows, or from
        the parts started ``ahead``), or started on the embedder's workers."""
        report = SyncReport()
        prepared: list[Prepared] = []
        gone: list[str] = []
        unique = list(dict.fromkeys(paths))
        for path in unique:
            outcome = self._prepare(path, report, ids)
            if outcome == "gone":
                gone.append(path)
            elif isinstance(outcome, Prepared):
                prepared.append(outcome)
                if isinstance(outcome.note, NoteRow):
                    ids.setdefault(outcome.note.note_id, path)
        staged = StagedBatch(len(unique), report, prepared, gone, *self._reusable(prepared))
        if staged.to_embed:
            texts = [text for _, text in staged.to_embed]
            if now:
                staged.embedded = self.batches.on_demand(texts)
            else:
                staged.embedded = self.batches.start(texts)
        return staged

    def _finish_later(self, staged: StagedBatch, again: list[str]) -> SyncReport:
        """``_finish`` for a batch staged earlier, once its vectors are there, without the files
        that changed on disk since they were read (those go to ``again``)."""
        if staged.embedded is not None:
            vectors = staged.embedded()  # outside the lock: a tool's write need not wait for the model
            staged.embedded = lambda: vectors
        with self._open_lock():
            changed = {p.file.path for p in staged.prepared if file_changed(self.vault, p.file, p.file.path)}
            if changed:
                again += sorted(changed)
                staged.prepared = [p for p in staged.prepared if p.file.path not in changed]
                staged.chunks = [(c, t) for c, t in staged.chunks if c.row.path not in changed]
            return self._finish(staged)

    def _finish(self, staged: StagedBatch) -> SyncReport:
        """Write a staged batch: its vectors, then its catalog rows; then drop its deleted files."""
        report = staged.report
        if staged.prepared:
            self._commit(staged, report)
        if staged.gone:  # after the commit, so a moved file reuses the vectors of its old path
            report.removed += self._remove_missing(staged.gone)
        return report

    def _prepare(self, path: str, report: SyncReport, ids: dict[str, str]) -> Prepared | str | None:
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
        return analyse_note(
            path,
            state.text,
            state.version,
            state.mtime_ns,
            state.size,
            self.max_chunk_chars,
            lambda note_id, path: self._holder_of(note_id, path, ids),
        )

    def _skip(self, path: str, mtime_ns: int, size: int, why: str, report: SyncReport) -> None:
        log.warning("skipped %s: %s", path, why)
        self._remove([path])
        self.catalog.replace(FileRow(path, None, mtime_ns, size, why), None, [])
        report.skipped += 1
        report.problems.append({"path": path, "problem": why})

    def _holder_of(self, note_id: str, path: str, ids: dict[str, str]) -> str | None:
        """Another existing file that has this id already (so this one is a duplicate), if any:
        in the catalog, or earlier in the batches being indexed (``ids``: two copies indexed together)."""
        earlier = ids.get(note_id)
        if earlier is not None and earlier != path:
            return earlier
        for other in self.catalog.notes_by_id(note_id):
            if other.path != path and self.vault.file(other.path).exists():
                return other.path
        return None

    def _reusable(
        self, prepared: list[Prepared]
    ) -> tuple[list[tuple[Any, str]], dict[str, list[float]], list[tuple[str, str]]]:
        """The batch's chunks with their texts, the vectors they reuse (same content, already
        embedded or recently removed) and the (chunk id, text) pairs left to embed."""
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
                vectors[chunk.row.chunk_id] = self._recently_removed[chunk.row.digest].tolist()
            else:
                to_embed.append((chunk.row.chunk_id, text))
        return all_chunks, vectors, to_embed

    def _commit(self, staged: StagedBatch, report: SyncReport) -> None:
        """Write a staged batch: the catalog rows first, then the vectors of its new chunks as the
        model gives them (for a tool's note the model still runs meanwhile). A crash at any point
        leaves no chunk with another text's vector: the vectors of chunks removed or changed leave
        Chroma before the catalog holds the new text, and a chunk without a vector in Chroma after
        a crash is found missing at the next start and embedded again."""
        prepared, all_chunks, vectors = staged.prepared, staged.chunks, staged.vectors
        report.reused_chunks += sum(1 for c, _ in all_chunks if c.row.chunk_id in vectors)
        new = {c.row.chunk_id: c.row.digest for c, _ in all_chunks}
        old = [r for p in prepared for r in self.catalog.chunks_of(p.file.path)]
        digests = set(new.values())
        self._remember([r for r in old if r.digest not in digests])  # replaced: kept for a while
        outdated = [r.chunk_id for r in old if new.get(r.chunk_id) != r.digest]
        if outdated:
            self.vectors.delete(outdated)
            self.missing.difference_update(outdated)
        self._store_vectors(all_chunks, vectors)
        self.missing.update(cid for cid, _ in staged.to_embed if cid in new)
        self.catalog.replace_many((p.file, p.note, p.chunks) for p in prepared)
        for p in prepared:
            report.indexed += 1
            if p.file.problem:
                report.problems.append({"path": p.file.path, "problem": p.file.problem})
        if staged.embedded is None:
            return
        pairs = [(cid, vec) for (cid, _), vec in zip(staged.to_embed, staged.embedded()) if cid in new]
        done = {cid: vec for cid, vec in pairs if isinstance(vec, list)}
        self._store_vectors(all_chunks, done)
        report.embedded_chunks += len(done)
        errors = [vec for _, vec in pairs if not isinstance(vec, list)]
        if errors:  # the files are indexed anyway; fill_missing embeds the rest later
            log.warning("indexed %d chunks without vectors: %s", len(errors), errors[-1])
            report.vectors_missing += len(errors)
            report.embedder_error = str(errors[-1])

    def _store_vectors(self, chunks: list[tuple[Any, str]], vectors: dict[str, list[float]]) -> None:
        """The vectors of these chunks it has, to Chroma in the background (searches see them at once)."""
        with_vectors = [c for c, _ in chunks if c.row.chunk_id in vectors]
        if with_vectors:
            ids = [c.row.chunk_id for c in with_vectors]
            self.vectors.upsert(ids, [vectors[i] for i in ids], wait=False)
            self.missing.difference_update(ids)
            crash_point("vectors-written")

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
                self._recently_removed[row.digest] = np.asarray(vectors[row.chunk_id], dtype=np.float32)
                self._recently_removed.move_to_end(row.digest)
        while len(self._recently_removed) > RECENTLY_REMOVED_MAX:
            self._recently_removed.popitem(last=False)
