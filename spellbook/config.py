"""Settings: read once at the edge (CLI), then passed down. Nothing below reads the environment.

Each setting comes from a keyword argument (a flag), else ``SPELLBOOK_<NAME>`` (any case; an empty
value counts as unset), else its default, and is checked against its type and bounds on the way in.
A value that does not fit raises ``SettingsError``, which names it, where it came from and what it
takes. Plain Python rather than pydantic-settings: importing it and building the model cost every
command 90-100 ms of its start (a hook, a search, and an import's first batch, on the interpreter
lock beside the model's load).

Only what a person sets is a setting (docs/configuration.md holds the table; a test keeps it in
step): tuning is a named constant in the module that uses it. A variable of a setting there was
once (``REMOVED``) gets one warning line and is otherwise ignored. The ground floor: this module
imports nothing of Spellbook's but the errors and the defaults (standard library only).
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from spellbook.defaults import DEFAULT_EMBEDDER, ENV_PREFIX, INDEX_DIRNAME, default_cache_dir
from spellbook.errors import InvalidInputError

# The embedder names, in the order the CLI lists them; embedders/registry.py builds each (and checks
# that it has exactly these).
EMBEDDERS = (DEFAULT_EMBEDDER, "minilm", "ollama", "openai", "hashing")
# Settings there were and are no longer read: a fixed value in the module that uses it now, or what
# to do instead. Set, each gets one warning line at start; nothing fails on it.
_FIXED = "Spellbook uses a fixed value now"
REMOVED = {
    name: _FIXED
    for name in (
        "ollama_timeout",
        "ollama_batch_size",
        "ollama_retries",
        "openai_timeout",
        "openai_retries",
        "embed_retry_seconds",
        "embed_processes",
        "max_text_chars",
        "max_chunk_chars",
        "duplicate_similarity",
        "importance_boost",
        "recency_half_life_days",
        "temporary_ttl_days",
        "default_ttl_days",
        "sweep_interval_seconds",
        "debounce_seconds",
        "log_level",
        "session_context_tokens",
        "session_prompt_min_relevance",
        "session_prompt_tokens",
        "summariser_daily_tokens",
    )
} | {
    "no_token": "pass --no-token to the command instead",
    "allowed_origins": "only the server's own and loopback Origins are allowed",
    "sync_remote": "sync uses the remote named origin",
    "summariser_url": "the summariser uses SPELLBOOK_OLLAMA_URL or SPELLBOOK_OPENAI_URL",
}
log = logging.getLogger("spellbook")
_warned: set[str] = set()
_BOOLS = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "t": True,
    "y": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
    "f": False,
    "n": False,
}
_YES_NO = {
    "1": "true",
    "yes": "true",
    "on": "true",
    "0": "false",
    "no": "false",
    "off": "false",
}  # for a choice of true/false


class SettingsError(InvalidInputError):
    """Settings that do not fit; ``problems``: one line for each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(
            "Invalid settings (fix these environment variables or flags):\n" + "\n".join(f"  {p}" for p in problems)
        )
        self.problems = problems


class Secret:
    """A value never shown: ``repr``/``str`` print stars; ``get_secret_value()`` gives it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def get_secret_value(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('**********')" if self._value else "Secret('')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


class _Setting:
    """One setting's default and rules; ``Settings`` reads its type from the annotation."""

    def __init__(
        self,
        default: Any,
        description: str,
        factory: Any,
        gt: float | None,
        ge: float | None,
        le: float | None,
        env: tuple[str, ...],
        choices: tuple[str, ...],
    ) -> None:
        self.default, self.description, self.factory = default, description, factory
        self.gt, self.ge, self.le, self.env = gt, ge, le, env
        self.name = self.kind = ""
        self.optional = False
        self.choices = choices  # a Literal's words, or those given

    def initial(self) -> Any:
        return self.factory() if self.factory is not None else self.default

    def convert(self, value: Any) -> Any:
        """``value`` as this setting's type (a string from the environment is parsed); raises
        ``TypeError``/``ValueError`` saying what it takes."""
        if value is None:
            if self.optional:
                return None
            raise ValueError("is required")
        kind = self.kind
        if kind in ("list[str]", "list[Path]"):
            if isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    raise ValueError('takes a JSON list, e.g. \'["a", "b"]\'') from None
            if not isinstance(value, list | tuple) or not all(isinstance(v, str | Path) for v in value):
                raise TypeError("takes a list of strings")
            return [Path(v) for v in value] if kind == "list[Path]" else [str(v) for v in value]
        if kind == "Path":
            if not isinstance(value, str | os.PathLike):
                raise TypeError("takes a path")
            return Path(value)
        if kind == "bool":
            if isinstance(value, bool):
                return value
            word = str(value).strip().lower() if isinstance(value, str | int) else None
            if word not in _BOOLS:
                raise ValueError("takes true or false (also 1/0, yes/no, on/off)")
            return _BOOLS[word]
        if kind in ("int", "float"):
            number = _number(value, kind)
            for bound, ok, words in (
                (self.gt, lambda b: number > b, "greater than"),
                (self.ge, lambda b: number >= b, "at least"),
                (self.le, lambda b: number <= b, "at most"),
            ):
                if bound is not None and not ok(bound):
                    raise ValueError(f"takes a number {words} {bound:g}")
            return number
        if kind == "Secret":
            return value if isinstance(value, Secret) else Secret(_text(value))
        if kind == "choice":
            word = str(value).lower() if isinstance(value, bool) else _text(value).strip().lower()
            if {"true", "false"} <= set(self.choices):
                word = _YES_NO.get(word, word)
            if word not in self.choices:
                raise ValueError(f"takes {', '.join(self.choices[:-1])} or {self.choices[-1]}")
            return word
        return _text(value)


def _number(value: Any, kind: str) -> int | float:
    what = "a whole number" if kind == "int" else "a number"
    try:
        if isinstance(value, bool):
            raise TypeError(value)
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise ValueError(f"takes {what}") from None
    if not math.isfinite(number) or (kind == "int" and not number.is_integer()):
        raise ValueError(f"takes {what}")
    return int(number) if kind == "int" else number


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("takes a string")
    return value


def setting(
    default: Any = None,
    description: str = "",
    *,
    factory: Any = None,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    env: tuple[str, ...] = (),
    choices: tuple[str, ...] = (),
) -> Any:
    """A setting of ``Settings``: its default (or ``factory`` for a fresh one), its bounds or the words
    it takes, and the environment variables it is read from (``env``; default ``SPELLBOOK_<NAME>``)."""
    return _Setting(default, description, factory, gt, ge, le, env, choices)


class Settings:
    """Every setting can come from the environment as ``SPELLBOOK_<NAME>`` or a CLI flag. Frozen:
    ``model_copy(update=...)`` makes a changed copy."""

    fields: ClassVar[dict[str, _Setting]]

    vault: Path = setting(Path("vault"), description="The markdown vault (source of truth).")
    index_dir: Path | None = setting(None, description="Where the derived index lives; default <vault>/.spellbook.")
    chroma_url: str | None = setting(
        None, description="Use a Chroma server (http://host:port) instead of the embedded folder."
    )
    embedder: str = setting(DEFAULT_EMBEDDER, description="Embedding model to use.", choices=EMBEDDERS)
    context: str | None = setting(
        None, description="Serve one project: every call sees this context's and shared memories only."
    )
    user: str | None = setting(
        None, description="Serve one person: every call sees this user's and shared memories only."
    )
    ollama_url: str = setting("http://127.0.0.1:11434", description="The Ollama server for the ollama embedder.")
    ollama_model: str = setting("nomic-embed-text", description="The Ollama embedding model.")
    openai_url: str = setting("https://api.openai.com/v1", description="Base URL of an OpenAI-compatible API.")
    openai_model: str = setting("text-embedding-3-small", description="The embedding model at openai_url.")
    openai_api_key: Secret | None = setting(None, description="Bearer key for openai_url; never logged.")
    openai_dimensions: int | None = setting(None, ge=1, description="Ask the model for shorter vectors.")
    openai_batch_size: int = setting(
        128, ge=1, le=2048, description="Texts per embeddings request (a server may take fewer: TEI 32 by default)."
    )
    overview_notes: bool = setting(
        False, description="Write a generated _overview.md (map of content) in each category folder."
    )
    watch: bool = setting(True, description="Watch the vault and re-index changes live.")
    redact: bool = setting(True, description="Redact secrets before they reach the vault or a tool answer.")
    redact_disabled: list[str] = setting(factory=list, description="Kinds of secret not to redact.")
    redact_patterns: list[str] = setting(factory=list, description="Extra regexes to redact (kind 'custom').")
    export_dirs: list[Path] = setting(
        factory=list,
        description="Folders (besides <index>/exports) an export may be written to, as a JSON "
        "list: SPELLBOOK_EXPORT_DIRS='[\"~/backups\"]'.",
    )
    token: str | None = setting(None, description="Bearer token for `serve --http` (required off loopback).")
    git_commit: Literal["auto", "true", "false"] = setting(
        "auto", description="Commit each tool write when the vault is a git repository (auto/true/false)."
    )
    sync_seconds: float | None = setting(
        None,
        gt=0,
        description="The index owner syncs the vault with its git remote this often, and soon after "
        "each write (docs/sync.md); off when unset.",
    )
    cache_dir: Path = setting(
        factory=lambda: Path(default_cache_dir()),
        description="Files Spellbook derives from installed packages (the model's table); default ~/.cache/spellbook.",
    )
    session_id: str | None = setting(
        None,
        env=("SPELLBOOK_SESSION_ID", "CLAUDE_CODE_SESSION_ID"),
        description="The client's session (Claude Code sets CLAUDE_CODE_SESSION_ID for the servers it starts): "
        "what scribe records as a memory's session.",
    )
    session_prompt_recall: bool | None = setting(
        None,
        env=("SPELLBOOK_RECALL", "SPELLBOOK_SESSION_PROMPT_RECALL"),
        description="UserPromptSubmit hook: add the memories most relevant to each prompt (unset: as the hook's "
        "--prompt-recall flag says; SPELLBOOK_RECALL=off turns it off whatever the flag).",
    )
    summariser: str | None = setting(
        None,
        description="Opt-in model-written session digests: ollama:<model> or openai:<model> "
        "(unset: the extractive digest only).",
    )

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(self.fields))
        if unknown:
            raise TypeError(f"no such setting: {', '.join(unknown)}")
        self._fill(values, os.environ)

    def _fill(self, values: Mapping[str, Any], environ: Mapping[str, str] | None) -> None:
        env = {k.upper(): v for k, v in environ.items()} if environ is not None else {}  # names in any case
        for key in sorted(ENV_PREFIX + name.upper() for name in REMOVED):
            if env.get(key, "") != "" and key not in _warned:
                _warned.add(key)
                log.warning("%s is no longer read (%s); unset it", key, REMOVED[key[len(ENV_PREFIX) :].lower()])
        problems: list[str] = []
        for name, spec in self.fields.items():
            source = f"{name}={values[name]!r}" if name in values else None
            raw: Any = values.get(name)
            if source is None:
                for key in spec.env or (ENV_PREFIX + name.upper(),):
                    if env.get(key.upper(), "") != "":
                        raw, source = env[key.upper()], f"{key}={env[key.upper()]!r}"
                        break
            try:
                value = spec.initial() if source is None else spec.convert(raw)
                value = self._check(name, value)
            except (TypeError, ValueError) as exc:
                shown = source if spec.kind != "Secret" else f"{source.split('=')[0]}=(hidden)"
                problems.append(
                    f"{shown}: {name} {exc}" + (f" - {spec.description.rstrip('.')}" if spec.description else "")
                )
                continue
            object.__setattr__(self, name, value)
        if problems:
            raise SettingsError(problems)

    @staticmethod
    def _check(name: str, value: Any) -> Any:
        if name == "summariser" and value is not None and not re.fullmatch(r"(?:ollama|openai):\S+", value):
            raise ValueError("takes ollama:<model> or openai:<model>, e.g. ollama:qwen2.5:3b")
        return value

    def model_copy(self, update: Mapping[str, Any] | None = None) -> Settings:
        """A copy with ``update``'s values (checked as flags are); the environment is not read again."""
        unknown = sorted(set(update or ()) - set(self.fields))
        if unknown:
            raise TypeError(f"no such setting: {', '.join(unknown)}")
        copy = object.__new__(type(self))
        copy._fill({**{name: getattr(self, name) for name in self.fields}, **(update or {})}, None)
        return copy

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Settings are frozen; use model_copy(update={{{name!r}: ...}})")

    def _values(self) -> tuple[Any, ...]:
        return tuple(tuple(v) if isinstance(v, list) else v for v in (getattr(self, n) for n in self.fields))

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._values() == self._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        shown = {n: "'**********'" if n == "token" and self.token else repr(getattr(self, n)) for n in self.fields}
        return f"Settings({', '.join(f'{n}={v}' for n, v in shown.items())})"

    @property
    def vault_dir(self) -> Path:
        return self.vault.expanduser().resolve()

    @property
    def index_path(self) -> Path:
        if self.index_dir is not None:
            return self.index_dir.expanduser().resolve()
        return self.vault_dir / INDEX_DIRNAME


def _collect(cls: type[Settings]) -> None:
    """Each setting's name and kind, from the class's annotations (strings: ``Path | None``)."""
    cls.fields = {}
    for name, annotation in cls.__annotations__.items():
        spec = cls.__dict__.get(name)
        if not isinstance(spec, _Setting):
            continue
        spec.name, spec.optional = name, annotation.endswith(" | None")
        kind = annotation.removesuffix(" | None")
        spec.kind = "choice" if kind.startswith("Literal[") or spec.choices else kind
        if kind.startswith("Literal["):
            spec.choices = tuple(re.findall(r"""['"]([^'"]+)['"]""", kind))
        if spec.kind not in ("str", "choice", "Path", "int", "float", "bool", "list[str]", "list[Path]", "Secret") or (
            spec.kind == "choice" and not spec.choices
        ):
            raise TypeError(f"setting {name}: no reader for {annotation}")
        cls.fields[name] = spec


_collect(Settings)


def settings_from(args: Any, **extra: Any) -> Settings:
    """Settings from command-line arguments (an ``argparse.Namespace``: the flags a command has),
    over the environment; ``extra`` values that are not None win over both."""
    overrides: dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
    for name in ("vault", "index_dir", "embedder", "chroma_url", "context", "user"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return Settings(**overrides)
