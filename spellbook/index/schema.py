"""The catalog's SQLite schema: the ledger, notes, chunks, FTS5 keyword index, tags, links and folder
notes (docs/architecture.md, "The index is derived"). A change here needs a new ``INDEX_FORMAT``."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, version TEXT, mtime_ns INTEGER, size INTEGER, problem TEXT
);
CREATE TABLE IF NOT EXISTS notes (
    path TEXT PRIMARY KEY, note_id TEXT NOT NULL, title TEXT, category TEXT, topic TEXT,
    type TEXT, context TEXT, importance INTEGER, tags TEXT, created TEXT, updated TEXT,
    folder TEXT, managed INTEGER, meta TEXT, expires TEXT, archived INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS notes_id ON notes(note_id);
CREATE TABLE IF NOT EXISTS folders (path TEXT PRIMARY KEY, folder TEXT NOT NULL, meta TEXT, body TEXT);
CREATE TABLE IF NOT EXISTS chunks (
    rowid INTEGER PRIMARY KEY, chunk_id TEXT UNIQUE NOT NULL, path TEXT NOT NULL,
    idx INTEGER NOT NULL, heading TEXT, text TEXT, digest TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path, chunk_id);  -- covering: filters list chunk ids by note path
CREATE INDEX IF NOT EXISTS chunks_digest ON chunks(digest);
CREATE TABLE IF NOT EXISTS tags (path TEXT NOT NULL, tag TEXT NOT NULL COLLATE NOCASE);
CREATE INDEX IF NOT EXISTS tags_tag ON tags(tag COLLATE NOCASE, path);
CREATE INDEX IF NOT EXISTS tags_path ON tags(path);
CREATE TABLE IF NOT EXISTS links (path TEXT NOT NULL, target TEXT NOT NULL, relation TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS links_path ON links(path);
CREATE INDEX IF NOT EXISTS links_target ON links(target COLLATE NOCASE);
CREATE INDEX IF NOT EXISTS links_relation ON links(relation, target COLLATE NOCASE);
CREATE TABLE IF NOT EXISTS unconfirmed (path TEXT PRIMARY KEY, session TEXT NOT NULL);  -- index/pending.py
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(title, meta, body, tokenize='unicode61 remove_diacritics 0');
CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vocab USING fts5vocab(chunks_fts, 'row');
"""

ADDED_COLUMNS = {
    "expires": "TEXT",
    "archived": "INTEGER NOT NULL DEFAULT 0",
    "user": "TEXT",
    # the Claude Code session a note belongs to (spellbook/sessions), read from the frontmatter
    "session": "TEXT GENERATED ALWAYS AS (json_extract(meta, '$.session')) VIRTUAL",
}

LATE_INDEXES = """
CREATE INDEX IF NOT EXISTS notes_expires ON notes(expires);
CREATE INDEX IF NOT EXISTS notes_archived ON notes(archived);
CREATE INDEX IF NOT EXISTS notes_context ON notes(context COLLATE NOCASE);
CREATE INDEX IF NOT EXISTS notes_user ON notes(user COLLATE NOCASE);
CREATE INDEX IF NOT EXISTS notes_session ON notes(session);
"""
