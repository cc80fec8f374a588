"""Note -> chunks. Pure: no I/O, no model.

A note is split at its headings (markdown-it-py, so a ``#`` inside a code fence is not a heading).
A section longer than ``max_chars`` is split further: by paragraph, then by line, then by
sentence, then hard, packing pieces back together up to ``max_chars`` (``EVENT_CHARS`` for an event of a
captured session, so a long answer's paragraphs are found on their own). Each chunk keeps its
heading path ("Setup > Linux") so a hit says where in the note it is.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from markdown_it import MarkdownIt

from spellbook.index.filters import event_type_of

CHUNKER_VERSION = 2
MAX_CHUNK_CHARS = 2_000  # hand-written sections longer than this are split further (part of the index's identity)
EVENT_CHARS = 800  # a captured session's event (sessions/notes.py) is cut finer: one turn, one chunk

# Headings are block tokens: the inline rules (a third of the parse) and the text join after them
# are left out; a heading's inline token keeps its source text in ``content`` all the same.
_md = MarkdownIt("commonmark").disable(["inline", "text_join"])
# A heading needs a ``#`` (ATX) or a line that ends in ``=`` or ``-`` (a setext underline, maybe
# inside a quote or a list): a body with neither has none, and is not parsed (most notes an agent
# writes; tests/unit/test_paths_chunker.py holds this equal to the full parse on generated text).
_HEADING_HINT = re.compile(r"#|[=-][ \t]*(?:[\r\n]|\Z)")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])")


@dataclass(frozen=True)
class Chunk:
    index: int
    heading: str  # "A > B" heading path, "" before the first heading
    text: str  # the chunk's exact markdown
    start_line: int  # 0-based line in the body where the chunk starts

    @property
    def digest(self) -> str:
        return hashlib.sha256(f"{self.heading}\n{self.text}".encode()).hexdigest()[:24]


def chunk_body(body: str, max_chars: int = 2_000) -> list[Chunk]:
    """Split a note body into chunks; blank sections are dropped (nothing to find in them)."""
    lines = body.splitlines(keepends=True)
    sections = _sections(body, lines)
    chunks: list[Chunk] = []
    for heading, start, end in sections:
        text = "".join(lines[start:end])
        content = "".join(lines[start + 1 : end]) if heading else text
        if not content.strip():
            continue  # a heading with nothing under it
        limit = min(max_chars, EVENT_CHARS) if event_type_of(heading) else max_chars
        for piece_start, piece in _split(text, limit, start, lines):
            if piece.strip():
                chunks.append(Chunk(len(chunks), heading, piece, piece_start))
    if not chunks and body.strip():  # only headings: still findable
        chunks.append(Chunk(0, "", body, 0))
    return chunks


def _sections(body: str, lines: list[str]) -> list[tuple[str, int, int]]:
    """(heading path, first line, end line) for the text before the first heading and each heading."""
    tokens = _md.parse(body) if _HEADING_HINT.search(body) else []
    marks: list[tuple[int, int, str]] = []  # (line, level, title)
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.map:
            title = tokens[i + 1].content.strip() if i + 1 < len(tokens) else ""
            marks.append((token.map[0], int(token.tag[1]), title))
    sections: list[tuple[str, int, int]] = []
    stack: list[tuple[int, str]] = []
    first = marks[0][0] if marks else len(lines)
    if first > 0:
        sections.append(("", 0, first))
    for n, (line, level, title) in enumerate(marks):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        end = marks[n + 1][0] if n + 1 < len(marks) else len(lines)
        sections.append((" > ".join(t for _, t in stack), line, end))
    return sections


def _split(text: str, max_chars: int, start_line: int, lines: list[str]) -> list[tuple[int, str]]:
    """Pieces of one section no longer than ``max_chars``, each with the body line it starts on."""
    if len(text) <= max_chars:
        return [(start_line, text)]
    pieces = _pieces(text, max_chars)
    packed: list[str] = []
    for piece in pieces:
        if packed and len(packed[-1]) + len(piece) <= max_chars:
            packed[-1] += piece
        else:
            packed.append(piece)
    out: list[tuple[int, str]] = []
    line = start_line
    for piece in packed:
        out.append((line, piece))
        line += piece.count("\n")
    return out


def _pieces(text: str, max_chars: int) -> list[str]:
    """Cut text at the coarsest boundary that makes pieces fit: paragraph, line, sentence, hard."""
    if len(text) <= max_chars:
        return [text]
    for splitter in (_paragraphs, _lines, _sentences):
        parts = splitter(text)
        if len(parts) > 1:
            return [p for part in parts for p in _pieces(part, max_chars)]
    return [text[i : i + max_chars] for i in range(0, len(text), max_chars)]


def _paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"(?<=\n\n)", text) if p]


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _sentences(text: str) -> list[str]:
    parts: list[str] = []
    last = 0
    for match in _SENTENCE_END.finditer(text):
        if match.end() > last:
            parts.append(text[last : match.end()])
            last = match.end()
    if last < len(text):
        parts.append(text[last:])
    return [p for p in parts if p]
