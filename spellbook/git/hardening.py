"""What every git call Spellbook makes is given, so that the repository it runs in starts no program
(docs/security.md, "Git in the vault runs nothing").

A repository's config (``.git/config``, what it includes, a worktree's config) is input from whoever
made the repository, and git reads the name of a program from many of its keys (git-config(1)).
Config given on the command line (``-c``) is read after every file, includes too, so it wins:

* ``FIXED``: the keys with a fixed name, on every call: hooks, fsmonitor, signature programs of the
  three formats and ``log.showSignature`` (a signed commit in the history made every ``git log``
  run ``gpg.ssh.program``), editors, pagers, ssh, askpass, credential helpers, gc;
* ``sweep_args``: the keys whose middle part the config names (a filter, diff or merge driver, a
  configured hook...), found by ``git config --get-regexp SWEPT`` and switched off one by one. A
  name with ``=`` in it cannot be given to ``-c`` (git cuts at the first ``=``): ``UnsafeName``,
  and the call is not made;
* ``ENV``: no transport at all (``GIT_ALLOW_PROTOCOL`` overrides every ``protocol.*`` key): a
  partial clone's missing object, read by ``cat-file`` or ``log``, made git fetch it through the
  config's ``ext::`` command or ``remote.<name>.uploadpack``. Only ``spellbook sync`` fetches and
  pushes (git/sync.py): it allows the file, git, http(s) and ssh transports, never ``ext::``, and
  gives ``remote.<name>.uploadpack``/``receivepack``, ``core.gitProxy``, ssh and credential helpers
  values of its own (the person's global ones), so none named by the repository runs.

Left as they are: ``alias.*`` (git never lets an alias hide a built-in, and Spellbook runs only
built-ins), ``uploadpack.packObjectsHook`` (git reads it only from the person's own config),
``gpg.ssh.allowedSignersFile`` and ``gpg.ssh.revocationFile`` (files the ssh program reads; no
signature is ever checked).
"""

from __future__ import annotations

from collections.abc import Iterable

FIXED = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.untrackedCache=false",
    "core.sshCommand=false",
    "core.askPass=",
    "core.editor=false",
    "sequence.editor=false",
    "core.pager=cat",
    "core.alternateRefsCommand=false",
    "diff.external=",
    "credential.helper=",
    "log.showSignature=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "push.gpgSign=false",
    "gpg.program=false",
    "gpg.openpgp.program=false",
    "gpg.x509.program=false",
    "gpg.ssh.program=false",
    "gpg.ssh.defaultKeyCommand=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "help.autoCorrect=0",
    "web.browser=",
    "help.browser=",
    "instaweb.httpd=",
    "sendemail.smtpServer=",
    "sendemail.sendmailCmd=",
    "sendemail.toCmd=",
    "sendemail.ccCmd=",
    "sendemail.headerCmd=",
    "status.submoduleSummary=false",
    "diff.ignoreSubmodules=all",
    "submodule.recurse=false",
)
# The section of a key with a name in the middle -> what each such name is given.
PER_NAME = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),  # "" is no filter
    "diff": (("textconv", ""), ("command", "")),
    "merge": (("driver", ""),),
    "mergetool": (("cmd", ""),),
    "difftool": (("cmd", ""),),
    "submodule": (("update", "none"),),
    "trailer": (("cmd", ""), ("command", "")),
    "browser": (("cmd", ""), ("path", "")),
    "man": (("cmd", ""), ("path", "")),
    "guitool": (("cmd", ""),),
    "sendemail": (("smtpServer", ""), ("sendmailCmd", ""), ("toCmd", ""), ("ccCmd", ""), ("headerCmd", "")),
    "hook": (("enabled", "false"),),  # configured hooks (git 2.54+)
}
SWEPT = rf"^({'|'.join(PER_NAME)})\..+\.[^.]+$"  # for git config --get-regexp
ARGS = ["--no-pager", *(arg for key in FIXED for arg in ("-c", key))]
# No transport ("none" is no protocol's name), no lazy fetch (git 2.44+), no prompt, no system config.
ENV = {"GIT_ALLOW_PROTOCOL": "none", "GIT_NO_LAZY_FETCH": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
# Subcommands that apply no attribute (filter, diff, merge drivers) and run no hook, whatever the
# config: they need only ``ARGS``. Every other one gets ``sweep_args`` too.
NO_DRIVERS = frozenset({"config", "rev-parse", "cat-file", "ls-tree", "check-ignore", "write-tree", "commit-tree"})
DRIVER_FLAGS = frozenset({"--filters", "--textconv"})  # cat-file's ways to run drivers


def needs_sweep(args: Iterable[str]) -> bool:
    """Whether git ``args`` (``-c`` pairs, then the subcommand) may run a driver or hook."""
    args = list(args)
    while args[:1] == ["-c"]:
        args = args[2:]
    return not args or args[0] not in NO_DRIVERS or bool(DRIVER_FLAGS & set(args))


class UnsafeName(ValueError):
    """A config key's name that ``-c`` cannot override."""


def sweep_args(names: Iterable[str]) -> list[str]:
    """``-c`` overrides for every name the config uses in a ``PER_NAME`` section (``names``: full
    keys as ``git config --name-only`` prints them, e.g. ``filter.lfs.clean``)."""
    found = set()
    for key in names:
        section, _, rest = key.partition(".")
        found.add((section.lower(), rest.rpartition(".")[0]))
    args: list[str] = []
    for section, name in sorted(found):
        if "=" in name:
            raise UnsafeName(
                f"the git config names a {section} {name!r}, and a name with '=' cannot be "
                "switched off; rename it (git config --rename-section)"
            )
        for key, value in PER_NAME.get(section, ()):
            args += ["-c", f"{section}.{name}.{key}={value}"]
    return args
