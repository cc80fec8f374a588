"""Settings: read once at the edge (CLI), then passed down. Nothing below reads the environment.

Each setting comes from a keyword argument (a flag), else ``SPELLBOOK_<NAME>`` (any case; an empty
value counts as unset), else its default, and is checked against its type and bounds on the way in.
A value that does not fit raises ``SettingsError``, which names it, where it came from and what it
takes. Plain Python rather than pydantic-settings: importing it and building the model cost every
command 90-100 ms of its start (a hook, a search, and an import's first batch, on the interpreter
lock beside the model's load).
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from spellbook.defaults import DEFAULT_EMBEDDER, ENV_PREFIX, INDEX_DIRNAME, default_cache_dir
from spellbook.errors import InvalidInputError

_BOOLS = {"1": True, "true": True, "yes": True, "on": True, "t": True, "y": True,
          "0": False, "false": False, "no": False, "off": False, "f": False, "n": False}
_YES_NO = {"1": "true", "yes": "true", "on": "true", "0": "false", "no": "false", "off": "false"}  # for a choice of true/false


class SettingsError(InvalidInputError):
    """Settings that do not fit; ``problems``: one line for each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("Invalid settings (fix these environment variables or flags):\n" + "\n".join(f"  {p}" for p in problems))
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

    def __init__(self, default: Any, description: str, factory: Any, gt: float | None, ge: float | None,
                 le: float | None, env: tuple[str, ...]) -> None:
        self.default, self.description, self.factory = default, description, factory
        self.gt, self.ge, self.le, self.env = gt, ge, le, env
        self.name = self.kind = ""
        self.optional = False
        self.choices: tuple[str, ...] = ()  # a Literal's words

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
                    raise ValueError("takes a JSON list, e.g. '[\"a\", \"b\"]'") from None
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
            for bound, ok, words in ((self.gt, lambda b: number > b, "greater than"),
                                     (self.ge, lambda b: number >= b, "at least"),
                                     (self.le, lambda b: number <= b, "at most")):
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


def setting(default: Any = None, description: str = "", *, factory: Any = None, gt: float | None = None,
            ge: float | None = None, le: float | None = None, env: tuple[str, ...] = ()) -> Any:
    """A setting of ``Settings``: its default (or ``factory`` for a fresh one), its bounds, and the
    environment variables it is read from besides ``SPELLBOOK_<NAME>`` (``env``: those instead)."""
    return _Setting(default, description, factory, gt, ge, le, env)


class Settings:
    """Every setting can come from the environment as ``SPELLBOOK_<NAME>`` or a CLI flag. Frozen:
    ``model_copy(update=...)`` makes a changed copy."""

    fields: ClassVar[dict[str, _Setting]]

    vault: Path = setting(Path("vault"), description="The markdown vault (source of truth).")
    index_dir: Path | None = setting(
        None, description="Where the derived index lives; default <vault>/.spellbook."
    )
    chroma_url: str | None = setting(
        None, description="Use a Chroma server (http://host:port) instead of the embedded folder."
    )
    embedder: str = setting(DEFAULT_EMBEDDER, description="Embedding model to use (a name in spellbook/embedders/registry.py).")
    context: str | None = setting(
        None, description="Serve one project: every call sees this context's and shared memories only."
    )
    user: str | None = setting(None, description="Serve one person: every call sees this user's and shared memories only.")
    ollama_url: str = setting("http://127.0.0.1:11434")
    ollama_model: str = setting("nomic-embed-text")
    ollama_timeout: float = setting(30.0, gt=0, description="Seconds to wait for one Ollama request.")
    ollama_batch_size: int = setting(64, ge=1, le=2048, description="Texts per Ollama request.")
    ollama_retries: int = setting(3, ge=0, le=10, description="Retries on connection errors, 5xx, 429.")
    openai_url: str = setting("https://api.openai.com/v1", description="Base URL of an OpenAI-compatible API.")
    openai_model: str = setting("text-embedding-3-small")
    openai_api_key: Secret | None = setting(None, description="Bearer key for openai_url; never logged.")
    openai_dimensions: int | None = setting(None, ge=1, description="Ask the model for shorter vectors.")
    openai_batch_size: int = setting(128, ge=1, le=2048, description="Texts per embeddings request.")
    openai_timeout: float = setting(30.0, gt=0, description="Seconds to wait for one embeddings request.")
    openai_retries: int = setting(3, ge=0, le=10, description="Retries on connection errors, 5xx, 429.")
    embed_retry_seconds: float = setting(
        30.0, gt=0, description="A network embedder that failed is skipped this long; missing vectors are "
        "retried this often.",
    )
    embed_processes: bool = setting(
        True, description="A first index or an import embeds in child processes forked with the model "
        "(Linux; the default model), where it does not wait for the GIL.",
    )
    max_text_chars: int = setting(50_000, ge=1, description="Largest body scribe/revise accept.")
    max_chunk_chars: int = setting(
        2_000, ge=200, description="Hand-written sections longer than this are split further."
    )
    duplicate_similarity: float = setting(
        0.8, ge=0.0, le=1.0, description="scribe flags an existing memory this similar as a near-duplicate."
    )
    importance_boost: float = setting(
        0.05, ge=0.0, le=0.5, description="Search score x (1 + boost x (importance - 3))."
    )
    recency_half_life_days: float | None = setting(
        None, gt=0, description="If set, older notes rank lower: score x (0.5 + 0.5 x 0.5^(age/half-life))."
    )
    temporary_ttl_days: float = setting(
        3.0, ge=0, description="Memories scribed with type 'temporary' and no expiry expire this many days later (0: never)."
    )
    default_ttl_days: float | None = setting(
        None, gt=0, description="If set, every other memory scribed without an expiry expires this many days later."
    )
    sweep_interval_seconds: float = setting(
        3600.0, ge=0.5, description="How often the index owner moves expired memories to _archive/."
    )
    overview_notes: bool = setting(
        False, description="Write a generated _overview.md (map of content) in each category folder."
    )
    watch: bool = setting(True, description="Watch the vault and re-index changes live.")
    debounce_seconds: float = setting(0.25, ge=0.0)
    redact: bool = setting(True, description="Redact secrets before they reach the vault or a tool answer.")
    redact_disabled: list[str] = setting(factory=list, description="Kinds of secret not to redact.")
    redact_patterns: list[str] = setting(factory=list, description="Extra regexes to redact (kind 'custom').")
    export_dirs: list[Path] = setting(
        factory=list, description="Folders (besides <index>/exports) an export may be written to, as a JSON "
        'list: SPELLBOOK_EXPORT_DIRS=\'["~/backups"]\'.',
    )
    token: str | None = setting(None, description="Bearer token for `serve --http` (required off loopback).")
    no_token: bool = setting(
        False, description="`serve --http` on loopback without a token: any local user can call the tools "
        "(unsafe on a shared machine).",
    )
    allowed_origins: list[str] = setting(factory=list, description="Extra browser Origins allowed over HTTP.")
    git_commit: Literal["auto", "true", "false"] = setting(
        "auto", description="Commit each tool write when the vault is a git repository (auto/true/false)."
    )
    sync_seconds: float | None = setting(
        None, gt=0, description="The index owner syncs the vault with its git remote this often, and soon after "
        "each write (docs/sync.md); off when unset.",
    )
    sync_remote: str = setting("origin", description="The git remote `spellbook sync` exchanges commits with.")
    cache_dir: Path = setting(
        factory=lambda: Path(default_cache_dir()),
        description="Files Spellbook derives from installed packages (the model's table); default ~/.cache/spellbook.",
    )
    log_level: str = setting("INFO")
    session_id: str | None = setting(
        None, env=("SPELLBOOK_SESSION_ID", "CLAUDE_CODE_SESSION_ID"),
        description="The client's session (Claude Code sets CLAUDE_CODE_SESSION_ID for the servers it starts): "
                    "what scribe records as a memory's session.",
    )
    session_context_tokens: int = setting(
        1500, ge=100, le=20_000, description="Budget of the context a SessionStart hook gives a new session."
    )
    session_prompt_recall: bool = setting(
        False, description="UserPromptSubmit hook: add the memories most relevant to each prompt (the hook "
        "`install claude-code --hooks` writes turns it on; SPELLBOOK_RECALL=off turns it off)."
    )
    session_prompt_min_relevance: float = setting(
        0.1, ge=0.0, le=1.0, description="Least relevance (0-1) of a passage added to a prompt."
    )
    session_prompt_tokens: int = setting(
        600, ge=50, le=20_000, description="Budget of the passages a UserPromptSubmit hook adds to a prompt."
    )
    summariser: str | None = setting(
        None, description="Opt-in model-written session digests: ollama:<model> or openai:<model> "
                          "(unset: the extractive digest only)."
    )
    summariser_url: str | None = setting(
        None, description="The summariser's endpoint (default: ollama_url, or openai_url with openai_api_key)."
    )
    summariser_daily_tokens: int = setting(
        50_000, ge=0, le=100_000_000, description="Most prompt+completion tokens the summariser spends per UTC day."
    )


    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(self.fields))
        if unknown:
            raise TypeError(f"no such setting: {', '.join(unknown)}")
        self._fill(values, os.environ)

    def _fill(self, values: Mapping[str, Any], environ: Mapping[str, str] | None) -> None:
        env = {k.upper(): v for k, v in environ.items()} if environ is not None else {}  # names in any case
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
                problems.append(f"{shown}: {name} {exc}" + (f" - {spec.description.rstrip('.')}" if spec.description else ""))
                continue
            object.__setattr__(self, name, value)
        if problems:
            raise SettingsError(problems)

    @staticmethod
    def _check(name: str, value: Any) -> Any:
        if name == "summariser" and value is not None and not re.fullmatch(r"(?:ollama|openai):\S+", value):
            raise ValueError("takes ollama:<model> or openai:<model>, e.g. ollama:qwen2.5:3b")
        if name == "embedder":
            from spellbook.embedders.registry import REGISTRY  # the one list of names

            if value not in REGISTRY:
                raise ValueError(f"is no embedder Spellbook has; choose one of {', '.join(REGISTRY)}")
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
        spec.kind = "choice" if kind.startswith("Literal[") else kind
        spec.choices = tuple(re.findall(r"""['"]([^'"]+)['"]""", kind)) if spec.kind == "choice" else ()
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
