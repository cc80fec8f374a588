"""The secret detectors the privacy filter runs (``privacy.py`` holds the policy and the public
API): value heuristics, one detector per kind of secret, and ``BUILTIN``, their order.
Every pattern is linear-time on any input (no nested or overlapping quantifiers)."""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from spellbook.vault import command_lines

MIN_VALUE_CHARS = 6  # shortest assignment value taken for a secret


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value`` (0 for empty); random base64 scores about 5, English about 3.5-4."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


# --- value heuristics -------------------------------------------------------------------------

_PLACEHOLDER_RE = re.compile(
    r"""^(?:
        <[^<>]*>                      # <your-password>
      | \{\{.*\}\} | \{%.*%\}         # {{ token }}  {% secret %}
      | \$\{.*\} | \$\(.*\)?          # ${DB_PASSWORD}  $(cat file)
      | \{[^{}]*\}                    # {password}
      | \$[A-Za-z_][A-Za-z0-9_]*      # $TOKEN
      | %\(?[A-Za-z_]*\)?[sd]         # %s  %(password)s
      | [*xX•·#._-]+                  # ****  xxxxxx  ......
      | .*(?:changeme|change[_-]me|example|placeholder|your[_-]|yourpass|redacted|replace[_-]?me|\.\.\.|…).*
    )$""",
    re.IGNORECASE | re.VERBOSE | re.DOTALL,
)
_STOPWORDS = frozenset(
    [
        "none",
        "null",
        "nil",
        "true",
        "false",
        "yes",
        "no",
        "on",
        "off",
        "undefined",
        "unset",
        "empty",
        "default",
        "required",
        "optional",
        "hidden",
        "masked",
        "secret",
        "secrets",
        "password",
        "passwords",
        "token",
        "tokens",
        "string",
        "str",
        "bytes",
        "int",
        "integer",
        "bool",
        "boolean",
        "number",
        "any",
        "object",
        "text",
        "secretstr",
        "secretbytes",
        "sensitive",
        "dummy",
        "test",
        "testing",
        "sample",
        "foo",
        "bar",
        "baz",
        "todo",
        "tbd",
        "fixme",
        "env",
        "environ",
        "environment",
        "prompt",
        "ask",
        "stdin",
        "keyring",
        "vault",
        "omitted",
        "generic",
        "opaque",
    ]
)
_SECRET_WORDS = frozenset({"password", "passwd", "pass", "pwd", "secret", "token", "key", "apikey", "passphrase"})
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_CALL_RE = re.compile(r"^[A-Za-z_][\w.]*\(")
_ATTR_PATH_RE = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+$")
_PATH_RE = re.compile(r"^(?:~?/|\.\.?/)[\w./~-]*$")
_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_ALGO_RE = re.compile(r"^[A-Z]+[-_]?\d+$")  # SHA-256, AES128, MD5


def _is_placeholder(value: str) -> bool:
    v = value.strip()
    return not v or "REDACTED" in v.upper() or bool(_PLACEHOLDER_RE.match(v)) or v.lower() in _STOPWORDS


def _plausible_value(value: str, *, quoted: bool) -> bool:
    """Is the value of ``<secret key> = value`` a real secret rather than a placeholder or code?"""
    v = value.strip()
    if len(v) < MIN_VALUE_CHARS or _is_placeholder(v):
        return False
    if quoted:
        return True
    if any(c in v for c in "([{<") or _CALL_RE.match(v) or (_ATTR_PATH_RE.match(v) and not _random_looking(v)):
        return False  # code: get_password(), settings.SECRET_KEY, Optional[str]
    if _PATH_RE.match(v) or _URL_RE.match(v) or v.startswith("!"):
        return False  # a file, a URL (credentials in URLs have their own detector), a YAML tag
    if _IDENT_RE.match(v) and not any(c.isdigit() for c in v):
        parts = {p.lower() for p in re.split(r"[_.-]", v)}
        if parts & _SECRET_WORDS:
            return False  # a variable that holds the secret: db_password, GITHUB_TOKEN
    return True


def _random_looking(value: str, *, min_len: int = 16, min_entropy: float = 3.0) -> bool:
    """Long, mixes letters and digits, and is not repetitive: the shape of a generated token."""
    return (
        len(value) >= min_len
        and any(c.isalpha() for c in value)
        and any(c.isdigit() for c in value)
        and shannon_entropy(value) >= min_entropy
        and not _is_placeholder(value)
    )


def _hf_like(token: str) -> bool:
    """hf_ + 34 letters: mixed case and random, unlike an identifier such as hf_model_name_..."""
    body = token[3:]
    return (
        any(c.isupper() for c in body)
        and any(c.islower() for c in body)
        and shannon_entropy(body) >= 3.5
        and not _is_placeholder(body)
    )


# --- detectors ---------------------------------------------------------------------------------

Match = tuple[str, int, int]  # kind, start, end


@dataclass(frozen=True)
class Detector:
    kinds: frozenset[str]
    find: Callable[[str], Iterable[Match]]
    covers_markers: bool = False  # may swallow an existing [REDACTED:...] marker (private spans, PEM)
    # Literals every match contains, one at least: a text with none of them is not searched (most
    # notes: the regexes cost ~10 us each on a 600-character note, ``in`` well under 1 us).
    needles: tuple[str, ...] = ()
    folded: bool = False  # needles are lower case, looked for in ``text.casefold()`` (IGNORECASE patterns)

    def __post_init__(self) -> None:
        # (folded, needle): how ``present_needles`` names a needle found in a text
        object.__setattr__(self, "keys", frozenset((self.folded, needle) for needle in self.needles))

    def may_match_in(self, present: frozenset[tuple[bool, str]]) -> bool:
        """Whether a text that holds these needles (``present_needles``) may hold a match."""
        return not self.needles or not self.keys.isdisjoint(present)


RESCAN_CHARS = 200  # a value passed over up to this long is searched again for a match


def _resume(m: re.Match[str], start: int, end: int) -> int:
    """Where a detector searches on after passing a match over: inside its value (``start``) when
    that is short, so a match in it is still found ("--token </private>--token s3cret"); after the
    match when long ("password=<password=<..." for 50 KB would make the search quadratic)."""
    return max(start, m.start() + 1) if end - start <= RESCAN_CHARS else m.end()


def _regex(
    kind: str, pattern: str, needles: tuple[str, ...], flags: int = 0, group: int | str = 0, accept=None
) -> Detector:
    compiled = re.compile(pattern, flags)

    def find(text: str) -> Iterator[Match]:
        pos = 0
        while (m := compiled.search(text, pos)) is not None:
            start, end = m.span(group)
            if start < end and (accept is None or accept(m.group(group))):
                pos = m.end()
                yield kind, start, end
            else:
                pos = _resume(m, start, end)

    return Detector(frozenset({kind}), find, needles=needles, folded=bool(flags & re.IGNORECASE))


_PRIVATE_OPEN_RE = re.compile(r"<\s*private(?:\s[^<>]*)?>", re.IGNORECASE)  # <private>, < PRIVATE >, <private a=1>
_PRIVATE_CLOSE_RE = re.compile(r"<\s*/\s*private\s*>", re.IGNORECASE)  # </private>, </ private >
_PARAGRAPH_END_RE = re.compile(r"\r?\n[ \t]*\r?\n")


def _find_private(text: str) -> Iterator[Match]:
    """Linear: every tag and paragraph end is found once, then each opening tag looks its end up."""
    if "<" not in text:
        return
    closes = [m.span() for m in _PRIVATE_CLOSE_RE.finditer(text)]
    close_starts = [start for start, _ in closes]
    paragraphs = [m.start() for m in _PARAGRAPH_END_RE.finditer(text)]
    pos = 0
    while (m := _PRIVATE_OPEN_RE.search(text, pos)) is not None:
        if "[REDACTED:" in m.group():  # "<x [REDACTED:private]>": a tag a redaction put together
            pos = m.start() + 1
            continue
        i = bisect.bisect_left(close_starts, m.end())
        if i < len(closes):
            end = closes[i][1]
        else:  # unclosed: hide the rest of the paragraph
            j = bisect.bisect_left(paragraphs, m.end())
            end = paragraphs[j] if j < len(paragraphs) else len(text)
        yield "private", m.start(), end
        pos = max(end, m.end())


_PEM_BEGIN_RE = re.compile(r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_END_RE = re.compile(r"-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY_RE = re.compile(  # the lines after an unterminated BEGIN: base64 and PEM headers
    r"(?:[ \t]*(?:\r?\n|\\n)[ \t]*(?:[A-Za-z0-9+/=]+|(?:Proc-Type|DEK-Info|Comment|Version|Hash):[^\n]*))*"
)


def _find_pem(text: str) -> Iterator[Match]:
    if "PRIVATE KEY" not in text:
        return
    end_starts, end_ends = [], []
    for m in _PEM_END_RE.finditer(text):
        end_starts.append(m.start())
        end_ends.append(m.end())
    pos = 0
    for m in _PEM_BEGIN_RE.finditer(text):
        if m.start() < pos:
            continue  # inside the block just reported
        i = bisect.bisect_left(end_starts, m.end())
        end = end_ends[i] if i < len(end_ends) else _PEM_BODY_RE.match(text, m.end()).end()
        yield "private-key", m.start(), end
        pos = end


# Generic "<secret key> <sep> value". Keys end at a non-word character, so password_hash,
# token_count, max_tokens and secret_name are not keys; `pwd` alone is the shell's working directory.
_KEY = r"""
    (?P<key>
        [\w.-]*?(?:password|passwd|passphrase|passcode)
      | (?:[\w.-]*[_.-])?pass
      | [\w.-]*[_.-]pwd
      | [\w.-]*?token
      | [\w.-]*?(?:api[_.-]?key|apikey|access[_.-]?key|app[_.-]?key|subscription[_.-]?key)
      | [\w.-]*?(?:secret(?:[_.-]?key)?|private[_.-]?key|encryption[_.-]?key|signing[_.-]?key|master[_.-]?key)
    )(?![\w])"""
_VALUE = r"""(?: "(?P<dq>[^"\n]*)" | '(?P<sq>[^'\n]*)' | `(?P<bq>[^`\n]*)` | (?P<uq>[^\s"'`,;)}\]]+) )"""
_ASSIGN_RE = re.compile(
    rf"""(?<![\w.-]){_KEY}\**["']?[ \t]*(?P<sep>:=|=>|==|=|:)(?![:=>])\**[ \t]*{_VALUE}""",
    re.IGNORECASE | re.VERBOSE,
)
_ASSIGN_HINT = re.compile(r"""(?:pass|pwd|token|key|secret)[\w.-]*\**["']?[ \t]*[:=]""", re.IGNORECASE)
_CLI_RE = re.compile(
    r"""(?<![\w-])--(?P<key>(?:[\w-]*-)?(?:password|passwd|pass|passphrase|token|api-?key|secret|access-key))
        [ \t]+(?!-)"""
    + _VALUE,
    re.IGNORECASE | re.VERBOSE,
)
_XML_RE = re.compile(rf"<{_KEY}>(?P<uq>[^<>\n]+)</(?P=key)>", re.IGNORECASE | re.VERBOSE)
_PROSE_RE = re.compile(
    r"""\b(?P<key>password|passphrase|passcode|secret|token|api[ _-]?key|access[ _-]?key|secret[ _-]?key)s?
        \s+(?:is|was|=)\s+(?:set\s+to\s+|now\s+|still\s+)?
        (?: (?P<q>["'`])(?P<qv>[^"'`\n]+)(?P=q) | (?P<uv>[^\s"'`]+) )""",
    re.IGNORECASE | re.VERBOSE,
)


def _key_kind(key: str) -> str:
    k = key.lower()
    if "pass" in k or "pwd" in k:
        return "password"
    if "token" in k:
        return "token"
    if "secret" in k or any(w in k for w in ("private", "encryption", "signing", "master")):
        return "secret"
    return "api-key"


def _value_span(m: re.Match[str]) -> tuple[int, int, str, bool]:
    for group, quoted in (("dq", True), ("sq", True), ("bq", True), ("uq", False)):
        if m.group(group) is not None:
            return m.start(group), m.end(group), m.group(group), quoted
    raise AssertionError("value group missing")


def _find_assignments(text: str) -> Iterator[Match]:
    # _ASSIGN_RE tries its key at every word character (~0.25 ms on a 600-character note); a
    # match holds one of these literals, then more key characters, then its separator
    for regex in (_ASSIGN_RE, _CLI_RE) if _ASSIGN_HINT.search(text) else (_CLI_RE,):
        pos = 0
        while (m := regex.search(text, pos)) is not None:
            start, end, value, quoted = _value_span(m)
            pos = _resume(m, start, end)
            if not quoted:  # "Set PASSWORD=hunter22." ends a sentence, not the password
                value = value.rstrip(".:")
                end = start + len(value)
            if not _plausible_value(value, quoted=quoted):
                continue
            if (
                not quoted
                and m.groupdict().get("sep") == ":"
                and value.isalpha()
                and re.match(r"[ \t]+[A-Za-z]", text[end:])
            ):
                continue  # "Password: stored in the team vault" is prose, not YAML
            pos = m.end()
            yield _key_kind(m.group("key")), start, end
    for m in _XML_RE.finditer(text):
        if _plausible_value(m.group("uq"), quoted=True):
            yield _key_kind(m.group("key")), m.start("uq"), m.end("uq")


def _find_prose(text: str) -> Iterator[Match]:
    pos = 0
    while (m := _PROSE_RE.search(text, pos)) is not None:
        pos = _resume(m, *m.span("qv" if m.group("qv") is not None else "uv"))
        if m.group("qv") is not None:
            value, start = m.group("qv"), m.start("qv")
            if len(value) < 4 or _is_placeholder(value):
                continue
        else:
            value, start = m.group("uv").rstrip(".,;:?)"), m.start("uv")
            if (
                len(value) < MIN_VALUE_CHARS
                or not any(c.isdigit() for c in value)
                or not any(c.isalpha() for c in value)
                or _ALGO_RE.match(value)
                or not _plausible_value(value, quoted=False)
            ):
                continue
        pos = m.end()
        yield _key_kind(m.group("key")), start, start + len(value)


# Korean, Japanese and Chinese credential phrases: "비밀번호: Xk9mPq2w", "パスワードは「Xk9mPq2w」です".
_CJK_KEYS = {
    "password": "비밀번호|패스워드|비번|암호|パスワード|暗証番号|密码|密碼|口令",
    "token": "토큰|トークン|令牌",
    "api-key": "API[ \t]?키|에이피아이[ \t]?키|액세스[ \t]?키|API[ \t]?キー|アクセス[ \t]?キー|API[ \t]?密钥",
    "secret": "시크릿(?:[ \t]?키)?|비밀[ \t]?키|秘密鍵|シークレット(?:[ \t]?キー)?|私钥|密钥",
}
_CJK_RE = re.compile(
    r"(?P<key>" + "|".join(f"(?P<k_{k.replace('-', '_')}>{v})" for k, v in _CJK_KEYS.items()) + r")"
    r"[ \t]*(?:(?P<sep>[:：=])|(?P<particle>은|는|이|가|は|が|是|为|為)[ \t]*[:：]?)[ \t]*"
    r"(?:(?P<q>[\"'`「『])(?P<qv>[^\"'`「『」』\n]{4,200})[\"'`」』]"
    r"|(?P<uv>[!#-&(-_a-~]{4,}?)(?=$|[\s、。，,！？）」』]|입니다|이에요|예요|이다|です|だ|。))",
    re.IGNORECASE,
)


def _find_cjk(text: str) -> Iterator[Match]:
    pos = 0
    while (m := _CJK_RE.search(text, pos)) is not None:
        pos = _resume(m, *m.span("qv" if m.group("qv") is not None else "uv"))
        kind = next(k.replace("_", "-")[2:] for k, v in m.groupdict().items() if k.startswith("k_") and v)
        if m.group("qv") is not None:
            value, start = m.group("qv"), m.start("qv")
            if _is_placeholder(value):
                continue
        else:
            value, start = m.group("uv").rstrip(".:;?!"), m.start("uv")
            pin = kind == "password" and value.isdigit() and len(value) >= 4
            if _ALGO_RE.match(value) or not (pin or _plausible_value(value, quoted=False)):
                continue
            if (
                m.group("particle")
                and not pin
                and not (any(c.isdigit() for c in value) and any(c.isalpha() for c in value))
            ):
                continue  # "토큰은 JWT입니다": prose, not a value
        pos = m.end()
        yield kind, start, start + len(value)


_URL_CRED_RE = re.compile(
    r"""\b[A-Za-z][A-Za-z0-9+.-]{1,30}://(?P<user>[^\s:/?#@\[\]"'<>]*):(?P<pw>[^\s@/?#"'<>]+)@""",
)


def _find_url_passwords(text: str) -> Iterator[Match]:
    for m in _URL_CRED_RE.finditer(text):
        user, pw = m.group("user"), m.group("pw")
        if "REDACTED" in pw.upper() or _PLACEHOLDER_RE.match(pw) and not pw.isalnum():
            continue  # ${DB_PASSWORD}, <password>, ****
        if pw.isdigit() and "." in user:
            continue  # host:port@ look-alike
        yield "url-password", m.start("pw"), m.end("pw")


_AUTH_RE = re.compile(
    r"""(?P<auth>authorization["']?[ \t]*[:=][ \t]*["']?)?
        \b(?P<scheme>bearer|token|basic)[ \t]+(?P<cred>[A-Za-z0-9._~+/=-]+)""",
    re.IGNORECASE | re.VERBOSE,
)


def _find_auth(text: str) -> Iterator[Match]:
    for m in _AUTH_RE.finditer(text):
        cred, scheme = m.group("cred"), m.group("scheme").lower()
        if m.group("auth"):
            if len(cred) < 8 or _is_placeholder(cred) or re.fullmatch(r"[A-Z_]+", cred):
                continue
            kind = "basic-auth" if scheme == "basic" else "bearer-token"
        elif scheme == "bearer" and _random_looking(cred):
            kind = "bearer-token"
        else:
            continue
        yield kind, m.start("cred"), m.end("cred")


_END = r"(?![\w-])"
# Needles of IGNORECASE patterns are looked for in text.casefold() and hold no "i": re also matches
# "i" to "ı" and "İ", which casefold() keeps apart ("s"/"ſ" and "k"/"K" it folds alike).
_CJK_NEEDLES = tuple(  # the key words of _CJK_KEYS: "API[ \t]?키" needs "API" and "키"; "키" will do
    dict.fromkeys(w for words in _CJK_KEYS.values() for w in re.split(r"\||\[ \t\]\?|\(\?:|\)\?|API", words) if w)
)
BUILTIN: tuple[Detector, ...] = (
    Detector(frozenset({"private"}), _find_private, covers_markers=True, needles=("<",)),
    Detector(frozenset({"private-key"}), _find_pem, covers_markers=True, needles=("PRIVATE KEY",)),
    _regex("aws-access-key", r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Za-z0-9])", ("AKIA", "ASIA")),
    _regex(
        "aws-secret-key",
        r"""(?<![\w])aws[_.-]?secret[_.-]?(?:access[_.-]?)?key["']?[ \t]*(?::=|=>|=|:)[ \t]*["'`]?"""
        r"(?P<v>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])",
        ("aws",),
        re.IGNORECASE,
        group="v",
    ),
    _regex(
        "github-token",
        r"(?<![\w])(?:gh[pousr]_[A-Za-z0-9]{36,251}|github_pat_[A-Za-z0-9_]{22,247})(?![\w])",
        ("gh", "github_pat_"),
    ),
    _regex("gitlab-token", r"(?<![\w-])glpat-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+)*" + _END, ("glpat-",)),
    _regex("anthropic-key", r"(?<![\w-])sk-ant-[A-Za-z0-9_-]{20,}" + _END, ("sk-ant-",)),
    _regex(
        "openai-key",
        r"(?<![\w-])sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}" + _END,
        ("sk-",),
        accept=lambda v: _random_looking(v, min_len=20),
    ),
    _regex(
        "slack-webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_-]+(?:/[A-Za-z0-9_-]+)+",
        ("https://hooks.slack.com/",),
    ),
    _regex("slack-token", r"(?<![\w-])(?:xox[abposr]|xapp)-[A-Za-z0-9-]{10,}[A-Za-z0-9]" + _END, ("xox", "xapp-")),
    _regex(
        "stripe-key",
        r"(?<![\w])(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,})(?![\w])",
        ("k_live_", "k_test_", "whsec_"),
    ),
    _regex("google-api-key", r"(?<![\w-])AIza[0-9A-Za-z_-]{35}" + _END, ("AIza",)),
    _regex("npm-token", r"(?<![\w])npm_[A-Za-z0-9]{36}(?![\w])", ("npm_",)),
    _regex("pypi-token", r"(?<![\w-])pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,}" + _END, ("pypi-AgEIcHlwaS5vcmc",)),
    _regex("huggingface-token", r"(?<![\w])hf_[A-Za-z0-9]{34,40}(?![\w])", ("hf_",), accept=_hf_like),
    _regex("jwt", r"(?<![\w-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*" + _END, ("eyJ",)),
    Detector(frozenset({"url-password"}), _find_url_passwords, needles=("://",)),
    Detector(frozenset({"bearer-token", "basic-auth"}), _find_auth, needles=("bearer", "token", "bas"), folded=True),
    Detector(
        frozenset({"password"}), lambda text: command_lines.find(text, _is_placeholder), needles=command_lines.NEEDLES
    ),
    Detector(
        frozenset({"password", "secret", "api-key", "token"}),
        _find_assignments,
        needles=("pass", "pwd", "token", "key", "secret"),
        folded=True,
    ),
    Detector(
        frozenset({"password", "secret", "api-key", "token"}),
        _find_prose,
        needles=("pass", "token", "key", "secret"),
        folded=True,
    ),
    Detector(frozenset({"password", "secret", "api-key", "token"}), _find_cjk, needles=_CJK_NEEDLES),
)
