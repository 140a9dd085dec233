"""Logging filters and formatters: every line carries its correlation id, and no line carries a credential."""

from __future__ import annotations

import logging
import re

from pythonjsonlogger.json import JsonFormatter

from .context import get_correlation_id

# Shapes of credentials that must never reach a log line, whatever logged them. Where a pattern has a
# ``secret`` group only that part is masked, so the line stays readable.
_SECRET_PATTERNS = [
    re.compile(r"(?P<secret>tess_[A-Za-z0-9]{8}_[A-Za-z0-9_-]{20,})"),  # Tess personal tokens
    re.compile(r"(?i)bearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{8,})"),
    re.compile(r"(?P<secret>\bsk-[A-Za-z0-9_-]{8,})"),
    re.compile(r"://[^/\s:@]*:(?P<secret>[^@\s/]+)@"),  # passwords in URLs, with or without a user name
    re.compile(r"(?i)(?:password|passwd|secret|api_key|apikey|token)\s*[=:]\s*(?P<secret>[^\s,;&]+)"),
    # One-time approval links (/approvals/<token>/, also URL-encoded inside ?next=). A token is 43 characters,
    # so the 36-character ids of /api/v1/approvals/<id>/ stay readable.
    re.compile(r"(?i)approvals(?:/|%2F)(?P<secret>[A-Za-z0-9_-]{40,})"),
]


def _mask(match: re.Match[str]) -> str:
    whole = match.group(0)
    start, end = match.start("secret") - match.start(), match.end("secret") - match.start()
    return whole[:start] + "[redacted]" + whole[end:]


def redact(text: str) -> str:
    """Mask every credential shape in ``text``."""
    for pattern in _SECRET_PATTERNS:
        text = pattern.sub(_mask, text)
    return text


class RedactingFormatter(logging.Formatter):
    """The text formatter, with credential shapes masked in the finished line.

    The filter below cleans the message; this catches what formatters add after it: ``extra`` fields (Django
    logs the request, whose repr holds the query string), stack information, and access-log lines.
    """

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


class RedactingJsonFormatter(JsonFormatter):
    """The JSON formatter, with credential shapes masked in the finished line."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))


def access_logger() -> logging.Logger:
    return logging.getLogger("tess.access")


class CorrelationIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "correlation_id"):
            record.correlation_id = get_correlation_id()
        return True


class RedactSecretsFilter(logging.Filter):
    """Render the message once, scrub credential shapes from it, and drop the arguments."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed format string is the caller's bug; keep the raw text
            message = str(record.msg)
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            # Exception messages quote URLs and keys too; format the traceback once, scrubbed, and let
            # formatters use that text instead of formatting exc_info again.
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True
