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

OWN_PATTERNS = (
    r"sk-(?:proj-|ant-(?:api\d+-)?|svcacct-|admin-)?[A-Za-z0-9_\-]{16,}",  # OpenAI, Anthropic
    r"(?i:bearer)\s+[A-Za-z0-9._~+/\-]{12,}=*",
    r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?i:basic)\s+[A-Za-z0-9+/]{8,}={0,2}",
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA|ABIA|ACCA)[0-9A-Z]{16}",  # AWS key ids
    r"gh[pousr]_[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{22,}",
    r"glpat-[A-Za-z0-9_\-]{20,}",
    r"hf_[A-Za-z0-9]{30,}",  # Hugging Face
    r"(?:sk|rk|pk)_live_[A-Za-z0-9]{16,}",  # Stripe live keys
    r"xox[abprs]-[A-Za-z0-9\-]{10,}",
    r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/\-]{20,}",
    r"AIza[0-9A-Za-z_\-]{35}",
    r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT
    # A private key block; without its END line (a value cut short), everything after BEGIN.
    r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----|[A-Za-z0-9+/=\s:,.\\\-]*)",  # (escaped newlines, as in a repr, count as body)
    # The password of a URL: postgresql://user:PASSWORD@host, mysql://, redis://, amqp://...
    r"[A-Za-z][A-Za-z0-9+.\-]{1,20}://[^\s/:@\"'<>]{1,128}:[^\s/@\"'<>]{1,256}@",
)

# Catalogue patterns that match ordinary prose ("APPLY", "APEX2024") more than keys.
_NOISY = ("AP[\\dABCDEF]",)


@functools.lru_cache(maxsize=1)
def catalogue_patterns() -> tuple[str, ...]:
    """detect-secrets' token formats that RE2 runs, or none when the package is missing."""
    try:
        from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    except ImportError:  # an install without it still has graphtape's own formats
        return ()
    from graphtape.recorder.linear_regex import compiles

    found: list[str] = []
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
                found.append(text)
    return tuple(dict.fromkeys(found))
