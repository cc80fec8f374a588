"""Settings (spellbook/config.py): flags over SPELLBOOK_* over defaults, each value checked on the
way in, and a value that does not fit named with where it came from and what it takes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spellbook.config import Secret, Settings, SettingsError, settings_from
from tests.helpers.processes import child_env

SPELLBOOK = str(Path(sys.executable).with_name("spellbook"))


@pytest.fixture(autouse=True)
def _no_spellbook_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.upper().startswith("SPELLBOOK_") or key == "CLAUDE_CODE_SESSION_ID":
            monkeypatch.delenv(key)


def test_defaults_then_the_environment_then_flags(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plain = Settings()
    assert (plain.vault, plain.embedder, plain.ollama_model, plain.watch, plain.export_dirs) == (
        Path("vault"),
        "use-m3",
        "nomic-embed-text",
        True,
        [],
    )
    monkeypatch.setenv("SPELLBOOK_VAULT", str(tmp_path / "env"))
    monkeypatch.setenv("spellbook_openai_dimensions", "16")  # any case, as before
    monkeypatch.setenv("SPELLBOOK_WATCH", "off")
    monkeypatch.setenv("SPELLBOOK_REDACT_PATTERNS", '["ACME-[0-9]+"]')
    monkeypatch.setenv("SPELLBOOK_EXPORT_DIRS", '["~/backups"]')
    monkeypatch.setenv("SPELLBOOK_GIT_COMMIT", "yes")
    monkeypatch.setenv("SPELLBOOK_CONTEXT", "")  # empty: unset
    monkeypatch.setenv("CLAUDE_CODE_SESSION_ID", "from-claude")
    from_env = Settings()
    assert (from_env.vault, from_env.openai_dimensions, from_env.watch) == (tmp_path / "env", 16, False)
    assert (from_env.redact_patterns, from_env.export_dirs) == (["ACME-[0-9]+"], [Path("~/backups")])
    assert (from_env.git_commit, from_env.context, from_env.session_id) == ("true", None, "from-claude")
    monkeypatch.setenv("SPELLBOOK_SESSION_ID", "own")  # the first name of a setting's list wins
    flags = settings_from(type("Args", (), {"vault": tmp_path / "flag", "context": "shop"})(), watch=True)
    assert (flags.vault, flags.context, flags.watch, flags.session_id) == (tmp_path / "flag", "shop", True, "own")
    assert flags.vault_dir == (tmp_path / "flag").resolve() and flags.index_path == flags.vault_dir / ".spellbook"


def test_every_bad_value_is_named_with_where_it_came_from_and_what_it_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPELLBOOK_OLLAMA_URL", "")  # empty: unset
    monkeypatch.setenv("SPELLBOOK_SYNC_SECONDS", "0")
    monkeypatch.setenv("SPELLBOOK_REDACT", "maybe")
    monkeypatch.setenv("SPELLBOOK_REDACT_DISABLED", "email")  # not JSON
    monkeypatch.setenv("SPELLBOOK_OPENAI_API_KEY", "sk-very-secret")
    monkeypatch.setenv("SPELLBOOK_RECALL", "sometimes")
    with pytest.raises(SettingsError) as caught:
        Settings(embedder="word2vec", openai_dimensions=2.5, openai_api_key=7, git_commit="sometimes")
    problems = caught.value.problems
    assert problems == [
        "embedder='word2vec': embedder takes use-m3, minilm, ollama, openai or hashing - Embedding model to use",
        "openai_api_key=(hidden): openai_api_key takes a string - Bearer key for openai_url; never logged",
        "openai_dimensions=2.5: openai_dimensions takes a whole number - Ask the model for shorter vectors",
        (
            "SPELLBOOK_REDACT='maybe': redact takes true or false (also 1/0, yes/no, on/off) - "
            "Redact secrets before they "
            "reach the vault or a tool answer"
        ),
        (
            "SPELLBOOK_REDACT_DISABLED='email': redact_disabled takes a JSON list, e.g. '[\"a\", \"b\"]' - "
            "Kinds of secret "
            "not to redact"
        ),
        (
            "git_commit='sometimes': git_commit takes auto, true or false - "
            "Commit each tool write when the vault is a git "
            "repository (auto/true/false)"
        ),
        (
            "SPELLBOOK_SYNC_SECONDS='0': sync_seconds takes a number greater than 0 - The index owner syncs the vault "
            "with its git remote this often, and soon after each write (docs/sync.md); off when unset"
        ),
        (
            "SPELLBOOK_RECALL='sometimes': session_prompt_recall takes true or false (also 1/0, yes/no, on/off) - "
            "UserPromptSubmit hook: add the memories most relevant to each prompt "
            "(unset: as the hook's --prompt-recall "
            "flag says; SPELLBOOK_RECALL=off turns it off whatever the flag)"
        ),
    ]
    assert str(caught.value).startswith("Invalid settings (fix these environment variables or flags):\n  embedder=")
    assert isinstance(caught.value, ValueError)
    with pytest.raises(TypeError, match="no such setting: valt"):
        Settings(valt="typo")


def test_secrets_are_never_shown_and_settings_are_frozen_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPELLBOOK_OPENAI_API_KEY", "sk-very-secret")
    settings = Settings(token="tok-9f8e7d")
    assert isinstance(settings.openai_api_key, Secret)
    assert settings.openai_api_key.get_secret_value() == "sk-very-secret"
    assert "sk-very-secret" not in repr(settings) and "tok-9f8e7d" not in repr(settings)
    assert "sk-very-secret" not in str(settings.openai_api_key)
    with pytest.raises(AttributeError, match="frozen"):
        settings.watch = False  # type: ignore[misc]
    monkeypatch.setenv("SPELLBOOK_WATCH", "false")  # a copy does not read the environment again
    copy = settings.model_copy(update={"context": "shop"})
    assert (copy.context, copy.watch, copy.openai_api_key) == ("shop", True, settings.openai_api_key)
    assert copy != settings and copy.model_copy(update={"context": None}) == settings
    assert hash(copy.model_copy(update={"context": None})) == hash(settings)
    with pytest.raises(SettingsError, match="openai_dimensions takes a number at least 1"):
        settings.model_copy(update={"openai_dimensions": 0})
    with pytest.raises(TypeError, match="no such setting: contxt"):
        settings.model_copy(update={"contxt": "shop"})


def test_a_bad_value_stops_a_command_with_its_line_not_a_traceback(tmp_path: Path) -> None:
    env = child_env(SPELLBOOK_SYNC_SECONDS="soon", SPELLBOOK_VAULT=str(tmp_path / "vault"))
    for argv in (["stats"], ["serve"], ["import", str(tmp_path / "export.json")]):
        done = subprocess.run(
            [SPELLBOOK, *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert done.returncode == 1, (argv, done.stderr[-800:])
        assert done.stderr.strip().splitlines() == [
            "spellbook: Invalid settings (fix these environment variables or flags):",
            (
                "  SPELLBOOK_SYNC_SECONDS='soon': sync_seconds takes a number - "
                "The index owner syncs the vault with its "
                "git remote this often, and soon after each write (docs/sync.md); off when unset"
            ),
        ], argv
    hook = subprocess.run(
        [SPELLBOOK, "hook", "SessionStart"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        input='{"session_id": "s", "hook_event_name": "SessionStart"}',
        check=False,
    )
    assert (hook.returncode, hook.stdout) == (0, "")  # a hook never breaks the session...
    assert "sync_seconds takes a number" in hook.stderr and "Traceback" not in hook.stderr  # ...and says why
    assert not (tmp_path / "vault").exists()  # nothing made


def test_settings_import_without_pydantic() -> None:
    code = "import sys, spellbook.config, spellbook.cli.main; print('pydantic' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.strip() == "False", done.stderr[-800:]


def test_a_setting_no_longer_read_is_named_once_and_never_stops_a_command(tmp_path: Path) -> None:
    vault = tmp_path / "vault"
    subprocess.run([SPELLBOOK, "init", str(vault)], env=child_env(), capture_output=True, timeout=60, check=True)
    env = child_env(
        SPELLBOOK_DEBOUNCE_SECONDS="1",
        SPELLBOOK_OLLAMA_TIMEOUT="soon",
        SPELLBOOK_NO_TOKEN="1",
        SPELLBOOK_VAULT=str(vault),
        SPELLBOOK_EMBEDDER="hashing",
    )
    done = subprocess.run(
        [SPELLBOOK, "stats"], env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False
    )
    assert done.returncode == 0, done.stderr[-800:]  # a value that would not fit is not even looked at
    warned = [line.split(" WARNING ", 1)[-1] for line in done.stderr.splitlines() if "no longer read" in line]
    assert warned == [  # one line each, though several Settings are built
        "SPELLBOOK_DEBOUNCE_SECONDS is no longer read (Spellbook uses a fixed value now); unset it",
        "SPELLBOOK_NO_TOKEN is no longer read (pass --no-token to the command instead); unset it",
        "SPELLBOOK_OLLAMA_TIMEOUT is no longer read (Spellbook uses a fixed value now); unset it",
    ], done.stderr[-800:]


def test_config_is_the_ground_floor_and_names_the_embedders_the_registry_builds() -> None:
    code = (
        "import sys, spellbook.config as c\n"
        "try:\n    c.Settings(embedder='word2vec')\nexcept c.SettingsError as e:\n    print(e.problems[0])\n"
        "print(sorted(m for m in sys.modules if m.startswith('spellbook.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=60, check=False
    )
    assert done.stdout.splitlines() == [
        "embedder='word2vec': embedder takes use-m3, minilm, ollama, openai or hashing - Embedding model to use",
        # the package's __init__ names its version
        "['spellbook.config', 'spellbook.defaults', 'spellbook.errors', 'spellbook.version']",
    ], done.stderr[-800:]
    from spellbook.config import EMBEDDERS
    from spellbook.embedders.registry import REGISTRY

    assert tuple(REGISTRY) == EMBEDDERS
