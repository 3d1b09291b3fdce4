"""The credential formats graphtape scrubs from text, each matched in linear time by RE2.

Two sources. The catalogue is detect-secrets' (Yelp): the token formats its plugins
know (AWS key ids, Azure storage keys, GitHub, GitLab, JWTs, Slack tokens and
webhooks, Stripe, SendGrid, npm, PyPI, Twilio, OpenAI...), read from the installed
package when a redactor is first made, so its list grows with the package. A
pattern RE2 cannot run (a lookbehind) is left out; a trailing ``(?!\\w)`` boundary,
which redaction does not need, is dropped. Graphtape adds what a chat agent's
recordings hold that the catalogue lacks or catches only in part: provider keys
(``sk-``, Hugging Face), bearer and basic authorization, credentials in URLs,
whole private-key blocks (also with their END line cut off) and Google keys.

Every pattern here must compile under RE2: RE2 matches in time linear in the text,
so no recorded string can make scrubbing slow (the old PEM pattern took 16 s on
280 KB of headers). ``tests/test_redaction.py`` holds an example of each.
"""

from __future__ import annotations

import functools
import re
from typing import Any

# Token formats: a key that is one word of its own. Each is matched only where a token can
# start (``TOKEN_START``): at the start of the text, after a character that cannot be part of
# a token, or after an escaped newline or tab (``\\n`` in a repr or in JSON text). The same
# letters inside a longer run (base64 of an image, a URL-safe id) are not a key: without the
# start rule, 1 MB of URL-safe base64 held a few "hf_..." and "sk-..." matches by chance, the
# last swallowing the rest of the run. The start is captured so the scrubber keeps it.
# What a scheme's credential ends with: its padding, or, when what looked like the credential is
# the name of the next key ("token_type=bearer access_token=X" on one line), that key's value too.
NOT_A_KEY = r"(?:[:=][ \t]*[^\s\"',;&]+|=*)"
TOKEN_START = r"(?P<start>^|\\[nrt]|%[0-9A-Fa-f]{2}|[^A-Za-z0-9_\-])"
OWN_TOKENS = (
    r"sk-(?:proj-|ant-(?:api\d+-)?|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}",  # OpenAI, Anthropic
    # A scheme and its credential are on one line: spaces or tabs between them, never a line break,
    # or "token_type: bearer" took the next line's key name for a credential and hid its value.
    r"(?i:bearer)(?:[ \t]+|%20|\+)[A-Za-z0-9._~+/\-]{12,}" + NOT_A_KEY,
    # (also a header as a pair: ('Authorization', 'Basic ...') in a repr, ["Authorization", "Basic ..."] in JSON)
    r"(?i:authorization)[\"']?[ \t]*(?:[:=]|,[ \t]*b?[\"'])[ \t]*[\"']?(?i:basic)[ \t]+[A-Za-z0-9+/]{8,}" + NOT_A_KEY,
    # Any other scheme (SSWS, OAuth, Token, a vendor's own): the credential is one long word.
    r"(?i:authori[sz]ation|authentication)[\"']?[ \t]*(?:[:=]|,[ \t]*b?[\"'])[ \t]*[\"']?[A-Za-z][A-Za-z0-9_\-]*[ \t]+[A-Za-z0-9._~+/\-]{16,}" + NOT_A_KEY,
    # An AWS key id and the secret key written after it (the console's credentials CSV, a table,
    # "AKIA... / wJalr..."): both go. Then a key id alone.
    r"(?:AKIA|ASIA)[0-9A-Z]{16}[ \t]*(?:[,;|:/\t]|\\t)[ \t\"']*[A-Za-z0-9/+]{40}",
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA|ABIA|ACCA)[0-9A-Z]{16}",  # AWS key ids
    r"gh[pousr]_[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{22,}",
    r"glpat-[A-Za-z0-9_\-]{20,}",
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"(?:sk|rk|pk)_live_[A-Za-z0-9]{16,}",  # Stripe live keys
    r"(?:sk|rk)_test_[A-Za-z0-9]{16,}",  # Stripe test keys: they still act on the account
    r"whsec_[A-Za-z0-9+/=]{24,}",  # Stripe (and Svix) webhook signing secrets
    r"npm_[A-Za-z0-9]{36}",  # npm access tokens
    r"xapp-\d-[A-Za-z0-9]+-\d+-[A-Za-z0-9]{20,}",  # Slack app-level tokens
    r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/\d+/[A-Za-z0-9_\-]{20,}",
    r"dop_v1_[a-f0-9]{64}|do[or]_v1_[a-f0-9]{64}",  # DigitalOcean
    r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}",  # Shopify
    r"dapi[a-f0-9]{32}(?:-\d)?",  # Databricks
    r"ATATT3[A-Za-z0-9_\-=]{100,}",  # Atlassian API tokens
    r"lin_(?:api|oauth)_[A-Za-z0-9]{32,}",  # Linear
    r"ntn_[A-Za-z0-9]{40,}|secret_[A-Za-z0-9]{43}",  # Notion
    r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}",  # Postman
    r"key-[a-f0-9]{32}",  # Mailgun
    r"xai-[A-Za-z0-9]{40,}",  # xAI
    r"gl(?:sa|c)_[A-Za-z0-9_+/=\-]{32,}",  # Grafana service accounts and cloud tokens
    r"gl(?:rt|dt|ptt|ft|soat|agent|imt|cbt)-[A-Za-z0-9_\-]{20,}",  # GitLab's other tokens
    r"dp\.(?:st|ct|sa|scim|audit|pt)\.[A-Za-z0-9_.\-]{32,}",  # Doppler
    r"hv[sbr]\.[A-Za-z0-9_\-]{24,}",  # HashiCorp Vault
    r"[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=\-]{60,}",  # Terraform Cloud
    r"pul-[a-f0-9]{40}",  # Pulumi
    r"sntr[ys]s?_[A-Za-z0-9+/=_\-]{40,}|sntryu_[a-f0-9]{64}",  # Sentry
    r"NRAK-[A-Z0-9]{27}",  # New Relic user keys
    r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}",  # age
    r"xox[abprs]-[A-Za-z0-9\-]{10,}",
    r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/\-]{20,}",
    r"AIza[0-9A-Za-z_\-]{35}",
    r"ya29\.[A-Za-z0-9_\-]{20,}",  # Google OAuth access tokens
    r"gsk_[A-Za-z0-9]{20,}",  # Groq
    r"lsv2_(?:pt|sk)_[A-Za-z0-9_]{20,}",  # LangSmith
    r"pplx-[A-Za-z0-9]{20,}",  # Perplexity
    r"tvly-(?:dev-|prod-)?[A-Za-z0-9]{20,}",  # Tavily
    r"pcsk_[A-Za-z0-9_]{30,}",  # Pinecone
    r"r8_[A-Za-z0-9]{30,}",  # Replicate
    r"fw_[A-Za-z0-9]{20,}",  # Fireworks
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT
    # Discord bot tokens, their signature whole: the catalogue's pattern stops at 27 characters,
    # and today's tokens carry 38 (the 11 left over were stored).
    r"[MNO][A-Za-z0-9_\-]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,}",
)
# Formats found anywhere in text.
OWN_TEXT_PATTERNS = (
    # Keys whose prefix is long enough never to occur by chance (not even in base64 of an
    # image), so they are found also glued to what comes before them ("id 5sk-proj-...").
    r"(?:sk-(?:proj|svcacct|admin)-|sk-ant-(?:api\d+-|admin\d+-)?|github_pat_|glpat-|lsv2_(?:pt|sk)_)[A-Za-z0-9_\-]{16,}",
    # A private key block; without its END line (a value cut short), everything after BEGIN (a
    # key name after it too: one cut in two, "refresh" taken and "_token: X" left, kept X).
    r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,._\\\-]*)",  # (escaped newlines, as in a repr, count as body)
    # A PEM private key in base64 (a Kubernetes secret's tls.key, a CI variable): "-----BEGIN "
    # encoded, then "PRIVATE KEY-" encoded at one of its three alignments, and the rest of the run
    # (a certificate, public, has no PRIVATE); wrapped lines too.
    r"LS0tLS1CRUdJTi[A-Za-z0-9+/]*(?:UFJJVkFURSBLRVkt|BSSVZBVEUgS0VZL|QUklWQVRFIEtFWS0)[A-Za-z0-9+/=]*(?:(?:\r?\n|(?:\\r)?\\n)[A-Za-z0-9+/=]+)*",
    # The password of a URL: postgresql://user:PASSWORD@host, mysql://, redis://, amqp://...
    # (no user name: redis://:PASSWORD@host; an unescaped @ in the password: up to the last @ of the authority)
    # (the scheme unbounded: a counted {1,20} made RE2's automaton track 20 starts at once and
    # fall back to its slow engine, 0.2 s per MB of base64)
    r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s/:@\"'<>]*:[^\s/\"'<>]+@",
    # A token given as the user of a URL, without a password (git's https://<token>@github.com/...).
    r"[A-Za-z][A-Za-z0-9+.\-]*://[A-Za-z0-9_\-]{24}[A-Za-z0-9_\-]*@",
    # A Cookie or Set-Cookie header's name=value pairs, all of them (a session id rarely comes first).
    # (a backslash ends it: in a repr or JSON text, the next line starts with an escaped newline)
    # (on its own line: an empty "Cookie:" does not take the next header's name for a cookie)
    r"(?i:cookie)[\"']?[ \t]*:[ \t]*[\"']?[^\s;=\"'\\]+(?:=[^;\s\"'\\]*)?(?:;[ \t]*[^\s;=\"'\\]+(?:=[^;\s\"'\\]*)?)*",
    # Credentials in a query string: signed URLs (Azure SAS sig=, S3's X-Amz-Signature and
    # X-Amz-Security-Token, GCS's X-Goog-Signature), API keys (key=), tokens.
    # (after # too: an OAuth implicit flow's redirect, cb#access_token=...; and percent-encoded, a URL
    # inside another URL's query: redirect=https%3A%2F%2Fapp%2Fcb%3Fclient_secret%3D...)
    r"(?:[?&#]|%3[Ff]|%26|%23)(?:[A-Za-z0-9]+-)*(?i:key|sig|signature|security-token|access_token|id_token|refresh_token|token|auth|apikey|api_key|client_secret|password)(?:=|%3[Dd])[^&\s\"'#<>\[\]]{8,}",  # ([ ] not: a value already scrubbed stays as it is)
    # An Azure Functions key (?code=, the function's whole credential) or an OAuth authorization
    # code in a redirect: long, where a country, promo or error code is a short word.
    r"(?:[?&#]|%3[Ff]|%26|%23)(?i:code)(?:=|%3[Dd])[A-Za-z0-9_\-/%.~+]{24,}={0,2}",
    # An npm registry's credential in an .npmrc line, whatever its form (a private registry's
    # token in no known format; the catalogue's rule asks for npm_ or 36 hex digits):
    # //registry.example/:_authToken=..., :_auth= (base64 user:password), :_password=.
    r"//[^\s\"'<>]*/:_(?:authToken|auth|password)=[ \t]*[^\s\"'#]+",
    # The private lines of a PuTTY key file (.ppk): its private key, in base64 lines.
    r"Private-Lines:[ \t]*\d+(?:(?:\r?\n|(?:\\r)?\\n)[A-Za-z0-9+/=]+)+",
)
OWN_PATTERNS = OWN_TOKENS + OWN_TEXT_PATTERNS

# Catalogue patterns that match ordinary prose ("APPLY", "APEX2024") more than keys.
_NOISY = ("AP[\\dABCDEF]",)


@functools.lru_cache(maxsize=1)
def catalogue_patterns() -> tuple[str, ...]:
    """detect-secrets' formats that RE2 runs (tokens and text patterns together), or none when the package is missing."""
    tokens, text = catalogue()
    return tokens + text


@functools.lru_cache(maxsize=1)
def catalogue() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """detect-secrets' formats that RE2 runs, as ``(tokens, text patterns)``: a format whose every
    match starts with a letter, digit or ``_`` is a token (matched where a token may start)."""
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    except ImportError:  # an install without it still has graphtape's own formats
        return (), ()
    from graphtape.recorder.linear_regex import compiles

    tokens: list[str] = []
    text_patterns: list[str] = []
    for cls in get_mapping_from_secret_type_to_class().values():
        try:
            plugin = cls()
        except Exception:  # noqa: BLE001 - a plugin that needs settings we do not give
            continue
        for rx in getattr(plugin, "denylist", ()) or ():
            text = getattr(rx, "pattern", None)
            if not isinstance(text, str) or rx.flags & re.VERBOSE or any(n in text for n in _NOISY):
                continue
            text = re.sub(r"\(\?!\\w\)$", "", text.strip())
            if rx.flags & re.IGNORECASE:
                text = f"(?i:{text})"
            if compiles(text):
                (tokens if _starts_with_a_word_character(text) else text_patterns).append(text)
    return tuple(dict.fromkeys(tokens)), tuple(dict.fromkeys(text_patterns))


def _starts_with_a_word_character(pattern: str) -> bool:
    """Whether every text ``pattern`` matches starts with a letter, digit or ``_`` (so a word boundary
    in front of it changes nothing but where it may start), read by Python's own regex parser."""
    try:
        from re import _parser as sre_parse
        from re import _constants as c
    except ImportError:  # pragma: no cover - Python 3.10
        import sre_constants as c  # type: ignore[no-redef]
        import sre_parse  # type: ignore[no-redef]
    word = set(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")

    def first(items: Any) -> bool:
        if not len(items):
            return False
        op, av = items[0]
        if op is c.LITERAL:
            return av in word
        if op is c.IN:
            ok = True
            for kind, value in av:
                if kind is c.LITERAL:
                    ok = ok and value in word
                elif kind is c.RANGE:
                    ok = ok and all(i in word for i in range(value[0], value[1] + 1))
                elif kind is c.CATEGORY:
                    ok = ok and value in (c.CATEGORY_DIGIT, c.CATEGORY_WORD)
                else:
                    return False
            return ok
        if op is c.SUBPATTERN:
            return first(av[3])
        if op is c.BRANCH:
            return all(first(branch) for branch in av[1])
        if op in (c.MAX_REPEAT, c.MIN_REPEAT):
            return av[0] >= 1 and first(av[2])
        return False

    try:
        return first(sre_parse.parse(pattern))
    except Exception:  # noqa: BLE001 - RE2-only syntax: left as it is
        return False
