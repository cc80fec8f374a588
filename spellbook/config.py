"""Settings: read once at the edge (CLI), then passed down. Nothing below reads the environment."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

INDEX_DIRNAME = ".spellbook"


def _user_cache() -> Path:
    xdg = os.environ.get("XDG_CACHE_HOME")
    return Path(xdg) if xdg else Path.home() / ".cache"


class Settings(BaseSettings):
    """Every setting can come from the environment as ``SPELLBOOK_<NAME>`` or a CLI flag."""

    model_config = SettingsConfigDict(env_prefix="SPELLBOOK_", frozen=True, extra="ignore")

    vault: Path = Field(default=Path("vault"), description="The markdown vault (source of truth).")
    index_dir: Path | None = Field(
        default=None, description="Where the derived index lives; default <vault>/.spellbook."
    )
    chroma_url: str | None = Field(
        default=None, description="Use a Chroma server (http://host:port) instead of the embedded folder."
    )
    embedder: str = Field(default="use-m3", description="Embedding model to use (a name in embedders/base.py REGISTRY).")
    context: str | None = Field(
        default=None, description="Serve one project: every call sees this context's and shared memories only."
    )
    user: str | None = Field(default=None, description="Serve one person: every call sees this user's and shared memories only.")
    ollama_url: str = "http://127.0.0.1:11434"
    ollama_model: str = "nomic-embed-text"
    ollama_timeout: float = Field(default=30.0, gt=0, description="Seconds to wait for one Ollama request.")
    ollama_batch_size: int = Field(default=64, ge=1, le=2048, description="Texts per Ollama request.")
    ollama_retries: int = Field(default=3, ge=0, le=10, description="Retries on connection errors, 5xx, 429.")
    openai_url: str = Field(default="https://api.openai.com/v1", description="Base URL of an OpenAI-compatible API.")
    openai_model: str = "text-embedding-3-small"
    openai_api_key: SecretStr | None = Field(default=None, description="Bearer key for openai_url; never logged.")
    openai_dimensions: int | None = Field(default=None, ge=1, description="Ask the model for shorter vectors.")
    openai_batch_size: int = Field(default=128, ge=1, le=2048, description="Texts per embeddings request.")
    openai_timeout: float = Field(default=30.0, gt=0, description="Seconds to wait for one embeddings request.")
    openai_retries: int = Field(default=3, ge=0, le=10, description="Retries on connection errors, 5xx, 429.")
    embed_retry_seconds: float = Field(
        default=30.0, gt=0, description="A network embedder that failed is skipped this long; missing vectors are "
        "retried this often.",
    )
    embed_processes: bool = Field(
        default=True, description="A first index or an import embeds in child processes forked with the model "
        "(Linux; the default model), where it does not wait for the GIL.",
    )
    max_text_chars: int = Field(default=50_000, ge=1, description="Largest body scribe/revise accept.")
    max_chunk_chars: int = Field(
        default=2_000, ge=200, description="Hand-written sections longer than this are split further."
    )
    duplicate_similarity: float = Field(
        default=0.8, ge=0.0, le=1.0, description="scribe flags an existing memory this similar as a near-duplicate."
    )
    importance_boost: float = Field(
        default=0.05, ge=0.0, le=0.5, description="Search score x (1 + boost x (importance - 3))."
    )
    recency_half_life_days: float | None = Field(
        default=None, gt=0, description="If set, older notes rank lower: score x (0.5 + 0.5 x 0.5^(age/half-life))."
    )
    temporary_ttl_days: float = Field(
        default=3.0, ge=0, description="Memories scribed with type 'temporary' and no expiry expire this many days later (0: never)."
    )
    default_ttl_days: float | None = Field(
        default=None, gt=0, description="If set, every other memory scribed without an expiry expires this many days later."
    )
    sweep_interval_seconds: float = Field(
        default=3600.0, ge=0.5, description="How often the index owner moves expired memories to _archive/."
    )
    overview_notes: bool = Field(
        default=False, description="Write a generated _overview.md (map of content) in each category folder."
    )
    watch: bool = Field(default=True, description="Watch the vault and re-index changes live.")
    debounce_seconds: float = Field(default=0.25, ge=0.0)
    redact: bool = Field(default=True, description="Redact secrets before they reach the vault or a tool answer.")
    redact_disabled: list[str] = Field(default_factory=list, description="Kinds of secret not to redact.")
    redact_patterns: list[str] = Field(default_factory=list, description="Extra regexes to redact (kind 'custom').")
    export_dirs: list[Path] = Field(
        default_factory=list, description="Folders (besides <index>/exports) an export may be written to, as a JSON "
        'list: SPELLBOOK_EXPORT_DIRS=\'["~/backups"]\'.',
    )
    token: str | None = Field(default=None, description="Bearer token for `serve --http` (required off loopback).")
    no_token: bool = Field(
        default=False, description="`serve --http` on loopback without a token: any local user can call the tools "
        "(unsafe on a shared machine).",
    )
    allowed_origins: list[str] = Field(default_factory=list, description="Extra browser Origins allowed over HTTP.")
    git_commit: Literal["auto", "true", "false"] = Field(
        default="auto", description="Commit each tool write when the vault is a git repository (auto/true/false)."
    )
    cache_dir: Path = Field(
        default_factory=lambda: _user_cache() / "spellbook",
        description="Files Spellbook derives from installed packages (the model's table); default ~/.cache/spellbook.",
    )
    log_level: str = "INFO"
    session_id: str | None = Field(
        default=None, validation_alias=AliasChoices("SPELLBOOK_SESSION_ID", "CLAUDE_CODE_SESSION_ID"),
        description="The client's session (Claude Code sets CLAUDE_CODE_SESSION_ID for the servers it starts): "
                    "what scribe records as a memory's session.",
    )
    session_context_tokens: int = Field(
        default=1500, ge=100, le=20_000, description="Budget of the context a SessionStart hook gives a new session."
    )
    session_prompt_recall: bool = Field(
        default=False, description="UserPromptSubmit hook: add the memories most relevant to each prompt."
    )
    session_prompt_min_relevance: float = Field(
        default=0.5, ge=0.0, le=1.0, description="Least relevance (0-1) of a memory added to a prompt."
    )

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, value: str) -> str:
        from spellbook.embedders.registry import REGISTRY  # the one list of names

        if value not in REGISTRY:
            raise ValueError(f"unknown embedder {value!r}; choose one of {', '.join(REGISTRY)}")
        return value

    @field_validator("git_commit", mode="before")
    @classmethod
    def _git_commit_words(cls, value: object) -> object:
        words = {"1": "true", "yes": "true", "on": "true", "0": "false", "no": "false", "off": "false"}
        if isinstance(value, bool):
            return "true" if value else "false"
        return words.get(str(value).strip().lower(), str(value).strip().lower())

    @property
    def vault_dir(self) -> Path:
        return self.vault.expanduser().resolve()

    @property
    def index_path(self) -> Path:
        if self.index_dir is not None:
            return self.index_dir.expanduser().resolve()
        return self.vault_dir / INDEX_DIRNAME


def settings_from(args: Any, **extra: Any) -> Settings:
    """Settings from command-line arguments (an ``argparse.Namespace``: the flags a command has),
    over the environment; ``extra`` values that are not None win over both."""
    overrides: dict[str, Any] = {k: v for k, v in extra.items() if v is not None}
    for name in ("vault", "index_dir", "embedder", "chroma_url", "context", "user"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return Settings(**overrides)
