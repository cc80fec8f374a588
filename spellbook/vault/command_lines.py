"""Passwords given on a command line by the short flags of the tools that take one there (the
``password`` kind of the privacy filter; detectors.py runs ``find`` in its order). Pure.

A flag is a password only after its own command, so ``ls -a``, ``ssh -p 2222`` or ``docker run -p
8080:80`` are not: ``mysql -pS3cret`` (attached; ``mysql -p db`` prompts, and ``db`` is a
database), ``sshpass -p S3cret``, ``curl -u admin:S3cret`` (``-u admin`` alone prompts), ``docker
login -p S3cret``, ``redis-cli -a S3cret``, ``echo S3cret | sudo -S`` (and ``sudo -S ... <<<
S3cret``), ``openssl ... -k S3cret``. ``--password S3cret``, ``--password=S3cret`` and openssl's
``-pass pass:S3cret`` are the assignment detector's (``pass:`` reads as a key; ``env:`` does not).
A value the caller's ``placeholder`` test refuses (``$PASS``, ``"${DB_PASSWORD}"``,
``<password>``) is kept, and so is one under ``MIN_CHARS``.

Linear: each form starts at a literal command name and looks at most ``ARGS_CHARS`` further for
its flag, never past the end of the command (a line break, ``|``, ``;`` or ``&``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

MIN_CHARS = 4  # "root" in mysql -proot is a password; "-py" is not worth a guess
ARGS_CHARS = 300
NEEDLES = ("mysql", "mariadb", "sshpass", "curl", "login", "-cli", "sudo", "openssl")

_START = r"(?<![\w.-])"  # a command name, perhaps after a folder: /usr/bin/mysql
_END = r"(?![\w-])"
_ARGS = rf"[^\n|;&]{{0,{ARGS_CHARS}}}?"  # the command's other arguments, up to the flag
_VALUE = r"""(?!-)(?:"(?P<dq>[^"\n]*)"|'(?P<sq>[^'\n]*)'|(?P<uq>[^\s"'`|;&<>()]+))"""
_USER_PASSWORD = r"""(?P<q>["']?)[^\s:"']*:(?P<pw>[^\s"']+)(?P=q)"""  # user:password, maybe quoted
_SUDO_ARGS = rf"(?:/usr/bin/)?sudo{_END}(?P<args>[^\n|;&<]{{0,{ARGS_CHARS}}}+)"  # possessive: no going back
_FORMS = tuple(
    re.compile(form)
    for form in (
        rf"{_START}(?:mysql|mariadb)[\w-]*{_END}{_ARGS}[ \t]-p(?=\S){_VALUE}",
        rf"{_START}sshpass(?:[ \t]+-[A-Za-oq-z]+)*[ \t]+-p[ \t]*{_VALUE}",
        rf"{_START}curl{_END}{_ARGS}[ \t](?:-[uU][ \t]*|--(?:proxy-)?user[ \t=]+){_USER_PASSWORD}",
        (
            rf"{_START}(?:docker|podman|nerdctl|buildah|skopeo|oras|helm(?:[ \t]+registry)?)[ \t]+login{_END}{_ARGS}"
            rf"[ \t]-p[ \t]*{_VALUE}"
        ),
        rf"{_START}(?:redis|valkey|keydb)-cli{_END}{_ARGS}[ \t]-a[ \t]*{_VALUE}",
        (
            rf"{_START}(?:echo|printf)(?:[ \t]+-[neE]{{1,3}})?(?:[ \t]+['\"]%s\\n['\"])?[ \t]+{_VALUE}"
            rf"(?=[ \t]*\|[ \t]*{_SUDO_ARGS})"  # sudo's arguments looked at, not taken: they may hold the next echo
        ),
        rf"{_START}{_SUDO_ARGS}<<<[ \t]*{_VALUE}",
        rf"{_START}openssl{_END}{_ARGS}[ \t]-k[ \t]+{_VALUE}",
    )
)
_STDIN_FLAG = re.compile(rf"[ \t]-(?:[A-Za-z]*S|-stdin){_END}")  # sudo reads the password from its input
_GROUPS = ("dq", "sq", "uq", "pw")


def find(text: str, placeholder: Callable[[str], bool]) -> Iterator[tuple[str, int, int]]:
    """("password", start, end) of each password given on a command line in ``text``."""
    for regex in _FORMS:
        for m in regex.finditer(text):
            group = next(g for g in _GROUPS if g in regex.groupindex and m.group(g) is not None)
            value = m.group(group)
            if "args" in regex.groupindex and not _STDIN_FLAG.search(m.group("args")):
                continue
            if len(value) >= MIN_CHARS and not placeholder(value):
                yield "password", m.start(group), m.end(group)
