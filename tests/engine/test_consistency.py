"""A Hypothesis state machine: what search can return == what the vault holds.

Under scribes, revises, erases, hand edits, hand renames and deletes, and restarts, every note in
the vault is found by its unique word, no deleted or replaced text is ever found, and the vector
index holds exactly the catalog's chunks.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from spellbook.config import Settings
from spellbook.embedders.hashing import HashingEmbedder
from spellbook.engine import Engine

WORDS = st.sampled_from(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "한국어", "日本語"])


class VaultMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp())
        self.vault = self.tmp / "vault"
        self.vault.mkdir()
        self.settings = Settings(vault=self.vault, embedder="hashing", watch=False)
        self.engine = self._open()
        self.notes: dict[str, str] = {}  # path -> the unique marker word it holds now
        self.dead: set[str] = set()  # markers that must never be found again
        self.pending: set[str] = set()  # hand changes the index may not know of until a sync
        self.counter = 0

    def _open(self) -> Engine:
        engine = Engine(self.settings, embedder=HashingEmbedder())
        engine.start()
        return engine

    def _marker(self) -> str:
        self.counter += 1
        return f"zq{self.counter}xv"

    def teardown(self) -> None:
        self.engine.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    @rule(word=WORDS)
    def scribe(self, word: str) -> None:
        marker = self._marker()
        out = self.engine.scribe(f"{word} {marker}", title=f"{word} note", category="c")
        self.notes[out["path"]] = marker

    @precondition(lambda self: set(self.notes) - self.pending)
    @rule(data=st.data())
    def revise(self, data) -> None:  # an agent knows ids of notes it found, i.e. indexed ones
        path = data.draw(st.sampled_from(sorted(set(self.notes) - self.pending)))
        note_id = self.engine.catalog.note_at(path).note_id
        marker = self._marker()
        self.engine.revise(note_id, text=f"revised {marker}")
        self.dead.add(self.notes[path])
        self.notes[path] = marker

    @precondition(lambda self: set(self.notes) - self.pending)
    @rule(data=st.data())
    def erase(self, data) -> None:  # an agent knows ids of notes it found, i.e. indexed ones
        path = data.draw(st.sampled_from(sorted(set(self.notes) - self.pending)))
        self.engine.erase(self.engine.catalog.note_at(path).note_id)
        self.dead.add(self.notes.pop(path))

    @rule(word=WORDS)
    def hand_write(self, word: str) -> None:
        marker = self._marker()
        path = f"hand/{marker}.md"
        (self.vault / "hand").mkdir(exist_ok=True)
        (self.vault / path).write_text(f"# {word}\n\nWritten by hand {marker}\n")
        self.notes[path] = marker
        self.pending.add(path)

    @precondition(lambda self: self.notes)
    @rule(data=st.data())
    def hand_edit(self, data) -> None:
        path = data.draw(st.sampled_from(sorted(self.notes)))
        file = self.vault / path
        marker = self._marker()
        file.write_text(file.read_text().replace(self.notes[path], marker))
        self.dead.add(self.notes[path])
        self.notes[path] = marker
        self.pending.add(path)

    @precondition(lambda self: self.notes)
    @rule(data=st.data())
    def hand_rename(self, data) -> None:
        path = data.draw(st.sampled_from(sorted(self.notes)))
        target = f"moved/{self._marker()}.md"
        (self.vault / "moved").mkdir(exist_ok=True)
        os.replace(self.vault / path, self.vault / target)
        self.notes[target] = self.notes.pop(path)
        self.pending.discard(path)
        self.pending.add(target)

    @precondition(lambda self: self.notes)
    @rule(data=st.data())
    def hand_delete(self, data) -> None:
        path = data.draw(st.sampled_from(sorted(self.notes)))
        (self.vault / path).unlink()
        self.dead.add(self.notes.pop(path))
        self.pending.discard(path)

    @rule()
    def sync(self) -> None:  # what the watcher does after a burst of events
        self.engine.reconcile()
        self.pending.clear()

    @rule()
    def restart(self) -> None:
        self.engine.close()
        self.engine = self._open()
        self.pending.clear()

    @invariant()
    def search_equals_vault(self) -> None:
        for path, marker in self.notes.items():
            if path in self.pending:
                continue  # not synced yet: may or may not be found, but never stale (below)
            hits = self.engine.memorize(marker, mode="keyword", limit=3)["results"]
            assert hits and hits[0]["path"] == path, (marker, path, hits)
        for marker in self.dead:
            for mode in ("keyword", "hybrid"):
                hits = self.engine.memorize(marker, mode=mode, limit=50)["results"]
                assert all(marker not in (self.vault / h["path"]).read_text() for h in hits)
                assert all(h["path"] in self.notes for h in hits), hits

    @invariant()
    def vectors_equal_catalog(self) -> None:
        assert self.engine.vectors.ids() == self.engine.catalog.all_chunk_ids()
        if not self.pending:
            assert self.engine.list_memories(limit=200)["total"] == len(self.notes)


TestVaultConsistency = VaultMachine.TestCase
TestVaultConsistency.settings = settings(
    max_examples=20, stateful_step_count=15, deadline=None, suppress_health_check=list(HealthCheck)
)
