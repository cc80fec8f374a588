"""Text as a reader and a file system see it: which script a text is written in, and how to cut
it to a number of UTF-8 bytes without splitting a character. Standard library only, on the ground
floor, for the vault's names, the files' temp names and the search's choice of ranking alike."""

from __future__ import annotations

import re

# Code points that belong to the character before them: combining marks are found by
# unicodedata; these are the joiners, variation selectors and emoji skin tones.
_JOINED = re.compile("[\u200c\u200d\ufe00-\ufe0f\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f\U000e0100-\U000e01ef]")


def mostly_latin(text: str) -> bool:
    """True when most letters of ``text`` are Latin script (what an English-only model reads)."""
    letters = [ch for ch in text if ch.isalpha()]
    latin = sum(1 for ch in letters if ch < "\u0250")  # Basic Latin .. Latin Extended-B
    return not letters or latin * 2 >= len(letters)


def cut_utf8(text: str, max_bytes: int) -> str:
    """The longest start of ``text`` that fits in ``max_bytes`` of UTF-8 and ends between two
    characters as a reader sees them (never inside a code point, nor between a letter and its
    combining accent, an emoji and its joiner, variation selector or skin tone)."""
    if len(text.encode("utf-8")) <= max_bytes:
        return text
    end = len(text.encode("utf-8")[:max_bytes].decode("utf-8", "ignore"))
    while end > 0 and (_continues(text[end]) or text[end - 1] == "\u200d"):
        end -= 1
    return text[:end]


def _continues(char: str) -> bool:
    import unicodedata  # here, not at the top: 0.35 ms of an agent hook's start, for long names only

    return bool(unicodedata.combining(char)) or _JOINED.match(char) is not None
