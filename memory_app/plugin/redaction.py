"""Redaction before persistence: secrets and end-customer data shapes never reach a memory adapter.

Each pattern has a name; matches are replaced with ``[redacted:<name>]`` and counted per name, and the
counts are part of the capture result. ``TESS_MEMORY_REDACTION_PATTERNS`` (name → regex) adds patterns;
the end-customer shapes are operator memory's own refusal shapes (``memory_app.policy``), so both kinds of
memory agree on what customer data looks like.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

from ..policy import refused_patterns

# Order matters: whole private key blocks and URL credentials go before the shorter token shapes inside them.
SECRET_PATTERNS: tuple[tuple[str, str], ...] = (
    ("private_key", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"),
    ("url_password", r"(?<=://)[^\s/:@]+:[^\s/@]+(?=@)"),
    ("bearer_token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}"),
    (
        "api_key",
        r"\b(?:sk-[A-Za-z0-9_-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|AKIA[0-9A-Z]{16}"
        r"|xox[abposr]-[A-Za-z0-9-]{10,}|tess_[A-Za-z0-9_-]{16,}|AIza[0-9A-Za-z_-]{30,})",
    ),
    ("assigned_secret", r"(?i)\b(?:api[_-]?key|secret|token|password|passwd)\s*[=:]\s*[^\s'\"]{6,}"),
)


@dataclass(frozen=True, slots=True)
class Redacted:
    text: str
    counts: dict[str, int]


def redaction_patterns() -> list[tuple[str, re.Pattern[str]]]:
    patterns = [(name, re.compile(rx, re.DOTALL)) for name, rx in SECRET_PATTERNS]
    extra: dict[str, str] = getattr(settings, "TESS_MEMORY_REDACTION_PATTERNS", {}) or {}
    patterns += [(name, re.compile(rx)) for name, rx in extra.items()]
    patterns += [("customer_data", pattern) for pattern in refused_patterns()]
    return patterns


def redact(text: str) -> Redacted:
    counts: dict[str, int] = {}
    for name, pattern in redaction_patterns():
        text, n = pattern.subn(f"[redacted:{name}]", text)
        if n:
            counts[name] = counts.get(name, 0) + n
    return Redacted(text=text, counts=counts)
