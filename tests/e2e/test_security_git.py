"""A vault's repository runs no program through Spellbook's git calls (docs/security.md, "Git in the
vault runs nothing"): a real repository whose config sets every key git-config(1) reads a program
from, in the file and in its includes, signed commits of the three signature formats (git checks
them on every ``git log`` when ``log.showSignature`` is on), a partial clone whose missing object
git would fetch through an ``ext::`` command, and hooks; then the real code paths: the engine's
writes and commits, history, diff, restore, the session hook's recent files, a real
``spellbook hook SessionStart`` process. Each program writes its key to a marker file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from spellbook.config import Settings
from spellbook.errors import VersionControlError
from spellbook.git.repo import Git
from spellbook.sessions.briefing import recent_files
from tests.helpers.engine import open_engine
from tests.helpers.git import git
from tests.helpers.processes import SPELLBOOK, child_env

# git-config(1)'s keys that name a program (or turn on a check that runs one), whatever the command.
PROGRAM_KEYS = [
    "core.fsmonitor",
    "core.sshCommand",
    "core.askPass",
    "core.editor",
    "sequence.editor",
    "core.pager",
    "core.alternateRefsCommand",
    "core.gitProxy",
    "diff.external",
    "credential.helper",
    "credential.https://example.com.helper",
    "gpg.program",
    "gpg.openpgp.program",
    "gpg.x509.program",
    "gpg.ssh.program",
    "gpg.ssh.defaultKeyCommand",
    "web.browser",
    "instaweb.httpd",
    "sendemail.smtpServer",
    "sendemail.sendmailCmd",
    "sendemail.toCmd",
    "sendemail.ccCmd",
    "sendemail.headerCmd",
    "sendemail.work.toCmd",
    "filter.evil.clean",
    "filter.evil.smudge",
    "filter.evil.process",
    "diff.evil.textconv",
    "diff.evil.command",
    "merge.evil.driver",
    "mergetool.evil.cmd",
    "difftool.evil.cmd",
    "remote.mirror.uploadpack",
    "remote.mirror.receivepack",
    "pager.log",
    "pager.show",
    "pager.status",
    "trailer.sign.command",
    "browser.evil.cmd",
    "man.evil.cmd",
    "guitool.evil.cmd",
]
SIGNATURES = {"ssh": "SSH SIGNATURE", "openpgp": "PGP SIGNATURE", "x509": "SIGNED MESSAGE"}
HOOKS = (
    "pre-commit",
    "post-commit",
    "reference-transaction",
    "post-index-change",
    "pre-auto-gc",
    "post-checkout",
    "fsmonitor-watchman",
    "post-rewrite",
    "push-to-checkout",
)


def program(bin_dir: Path, name: str, marker: Path) -> Path:
    """A program that writes ``name`` and its arguments to ``marker`` and fails at once."""
    path = bin_dir / name.replace("/", "_").replace(":", "_")
    path.write_text(f'#!/bin/sh\necho "{name} $*" >> {marker}\nexit 1\n')
    path.chmod(0o755)
    return path


def signed_commit(root: Path, message: str, header: str) -> str:
    """A commit of the index's tree on HEAD carrying a (fake) ``gpgsig`` header, made by hand."""
    tree = git(root, "write-tree").strip()
    parent = git(root, "rev-parse", "HEAD").strip()
    body = (
        f"tree {tree}\nparent {parent}\nauthor Person <p@x> 1700000000 +0000\n"
        f"committer Person <p@x> 1700000000 +0000\ngpgsig -----BEGIN {header}-----\n U1NIU0lHAAAAAQ==\n"
        f" -----END {header}-----\n\n{message}\n"
    )
    (root.parent / "commit.txt").write_text(body)
    commit = git(root, "hash-object", "-t", "commit", "-w", str(root.parent / "commit.txt")).strip()
    git(root, "update-ref", "HEAD", commit)
    return commit


def hostile_vault(root: Path, marker: Path) -> None:
    """A vault with a note whose history holds signed commits of every format, a missing old
    version a partial clone would fetch, and a config that names a program in every key."""
    root.mkdir()
    bin_dir = root.parent / "bin"
    bin_dir.mkdir()
    git(root, "init", "-q", "-b", "main")
    (root / ".gitignore").write_text(".spellbook/\n.trash/\n")
    (root / "notes").mkdir()
    note = root / "notes" / "Signed.md"
    note.write_text("---\nid: signed-1\ntitle: Signed\n---\nThe first version.\n")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "base")
    lost = git(root, "rev-parse", "HEAD:notes/Signed.md").strip()
    for n, (fmt, header) in enumerate(SIGNATURES.items(), 2):
        note.write_text(f"---\nid: signed-1\ntitle: Signed\n---\nVersion {n}, signed with {fmt}.\n")
        git(root, "add", "-A")
        signed_commit(root, f"version {n}", header)
    (root / ".git" / "objects" / lost[:2] / lost[2:]).unlink()  # the first version is "not fetched yet"
    (root / ".gitattributes").write_text("*.md filter=evil diff=evil merge=evil\nnotes/*.md filter=inc diff=inc\n")

    settings = [(key, str(program(bin_dir, key, marker))) for key in PROGRAM_KEYS]
    allowed = root.parent / "allowed_signers"
    allowed.write_text("p@x ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBogusBogusBogusBogusBogusBogusBogusBogusBo\n")
    settings += [
        ("log.showSignature", "true"),
        ("gpg.format", "ssh"),
        ("gpg.ssh.allowedSignersFile", str(allowed)),
        ("commit.gpgSign", "true"),
        ("tag.gpgSign", "true"),
        ("user.signingKey", "key::ssh-ed25519 AAAA"),
        ("filter.evil.required", "true"),
        ("gc.auto", "1"),
        ("gc.autoDetach", "false"),
        ("maintenance.auto", "true"),
        ("core.hooksPath", str(root.parent / "hooks")),
        ("help.autoCorrect", "-1"),
        ("submodule.sub.update", f"!{program(bin_dir, 'submodule', marker)}"),
        ("alias.lg", f"!{program(bin_dir, 'alias', marker)}"),
        ("hook.evil.event", "reference-transaction"),
        ("hook.evil.command", str(program(bin_dir, "hook.evil", marker))),
        # A partial clone: git fetches a missing object from its promisor remotes when a command reads it.
        ("core.repositoryFormatVersion", "1"),
        ("extensions.partialClone", "origin"),
        ("remote.origin.url", f"ext::{program(bin_dir, 'ext-transport', marker)} %S"),
        ("remote.origin.promisor", "true"),
        ("remote.mirror.url", str(root.parent / "mirror")),
        ("remote.mirror.promisor", "true"),
        ("protocol.allow", "always"),
        ("protocol.ext.allow", "always"),
        ("protocol.file.allow", "always"),
    ]
    for key, value in settings:
        git(root, "config", "--add", key, value)
    include = root.parent / "included.gitconfig"
    include_if = root.parent / "included-if.gitconfig"
    include.write_text(
        f'[gpg "x509"]\n\tprogram = {program(bin_dir, "gpg.x509.program(included)", marker)}\n'
        f'[diff "inc"]\n\ttextconv = {program(bin_dir, "diff.inc.textconv", marker)}\n'
    )
    include_if.write_text(
        f'[filter "inc"]\n\tclean = {program(bin_dir, "filter.inc.clean", marker)}\n'
        f"\tsmudge = {program(bin_dir, 'filter.inc.smudge', marker)}\n"
    )
    git(root, "config", "include.path", str(include))
    git(root, "config", f"includeIf.gitdir:{root}/.git.path", str(include_if))
    for folder in (root.parent / "hooks", root / ".git" / "hooks"):
        folder.mkdir(exist_ok=True)
        for hook in HOOKS:
            program(folder, hook, marker)
            (folder / hook.replace("/", "_")).rename(folder / hook)


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    vault = tmp_path / "vault"
    hostile_vault(vault, tmp_path / "ran.txt")
    assert not (tmp_path / "ran.txt").exists()
    return vault


def ran(vault: Path) -> str:
    marker = vault.parent / "ran.txt"
    return marker.read_text() if marker.exists() else ""


def test_every_key_that_names_a_program_is_switched_off_for_every_git_call(vault: Path) -> None:
    def clean(after: str) -> None:
        assert ran(vault) == "", f"{after} ran: {ran(vault)}"

    engine = open_engine(Settings(vault=vault, embedder="hashing", watch=False, git_commit="true"))
    try:
        hist = engine.history("signed-1")
        clean("history")
        # "base" is the version a partial clone has not fetched: not read, so not shown to be this memory's
        # (history lists only versions that hold its id in a scope the caller sees, docs/security.md)
        assert [v["message"] for v in hist["versions"]] == ["version 4", "version 3", "version 2"]
        engine.diff("signed-1", hist["versions"][1]["version"])
        clean("diff")
        engine.restore("signed-1", hist["versions"][2]["version"])
        stored = engine.scribe("Deploys go through CI.", title="Deploy pipeline", category="ops")
        engine.revise(stored["id"], text="Deploys go through ArgoCD.")
        engine.history(stored["id"])
        engine.erase(stored["id"])
        engine.git.flush()
        clean("restore, scribe, revise, erase and their commits")
        assert engine.stats()["git"]["commits"] == 4
        repo = Git(vault).repo()
        assert repo is not None
        assert Git(vault).status(repo, ["notes/Signed.md"]) == {}
        assert Git(vault).file_log(repo, "notes/Signed.md")[-1].message == "base"
    finally:
        engine.close()
    assert recent_files(str(vault)) == ["Deploy pipeline", "Signed"]
    clean("status, log, recent_files")
    # The attack is real: plain git in the same vault runs the signature programs on a log, and the
    # partial clone's fetch on a read of the old version.
    subprocess.run(["git", "log"], cwd=vault, capture_output=True, check=False, timeout=30)
    assert "gpg.ssh.program -Y" in ran(vault)
    base = git(vault, "rev-list", "--max-parents=0", "HEAD").strip()
    subprocess.run(["git", "show", f"{base}:notes/Signed.md"], cwd=vault, capture_output=True, check=False, timeout=30)
    assert "ext-transport" in ran(vault)


def test_the_session_start_hook_runs_nothing_from_the_repository_it_is_opened_in(vault: Path, tmp_path: Path) -> None:
    """Claude Code opened in a hostile repository: the real hook process lists its recent files."""
    notes = tmp_path / "notes"
    notes.mkdir()
    payload = json.dumps({"session_id": "s", "hook_event_name": "SessionStart", "cwd": str(vault)})
    hook = subprocess.run(
        [SPELLBOOK, "hook", "SessionStart", "--vault", str(notes)],
        input=payload,
        text=True,
        capture_output=True,
        env=child_env(SPELLBOOK_EMBEDDER="hashing"),
        timeout=60,
        check=False,
    )
    assert hook.returncode == 0, hook.stderr
    assert ran(vault) == ""
    assert "hook SessionStart done" in (notes / ".spellbook" / "hooks.log").read_text()


def test_a_driver_whose_name_git_cannot_be_told_to_ignore_stops_git_with_a_clear_reason(tmp_path: Path) -> None:
    """``-c filter.a=b.clean=`` sets ``filter.a`` to ``b.clean=``: git cuts at the first ``=``."""
    vault = tmp_path / "vault"
    vault.mkdir()
    git(vault, "init", "-q", "-b", "main")
    (vault / ".gitignore").write_text(".spellbook/\n")
    (vault / ".gitattributes").write_text("*.md filter=a=b\n")
    git(vault, "add", "-A")
    git(vault, "commit", "-qm", "base")
    git(vault, "config", "filter.a=b.clean", str(program(tmp_path, "filter.a=b.clean", tmp_path / "ran.txt")))
    engine = open_engine(Settings(vault=vault, embedder="hashing", watch=False, git_commit="true"))
    try:
        stored = engine.scribe("A note.", title="Plain", category="notes")
        engine.git.flush()
        with pytest.raises(VersionControlError, match=r"filter 'a=b'.*cannot be switched off"):
            engine.history(stored["id"])
        assert engine.stats()["git"]["commits"] == 0
    finally:
        engine.close()
    assert not (tmp_path / "ran.txt").exists()
    subprocess.run(["git", "add", "-A"], cwd=vault, capture_output=True, check=False, timeout=30)
    assert (tmp_path / "ran.txt").exists()  # the attack is real
