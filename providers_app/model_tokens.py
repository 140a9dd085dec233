"""Counting a model's tokens, to keep a conversation within its budget (``TESS_CONVERSATION_TOKENS``).

Exact where the model's vocabulary ships inside an installed package: ``bpe-openai`` carries the
``o200k_base`` and ``cl100k_base`` files in its wheel, so nothing is downloaded at run time (``tiktoken``
would fetch its files on first use). Every other model (including ``tess-deterministic``) is counted by a
stated estimate with a safety margin: one token per three bytes of UTF-8, rounded up. A BPE token of
these vocabularies averages about four bytes of English and no fewer than one CJK character (three bytes),
so the estimate errs towards more tokens, never fewer.

Each chat message also costs a few tokens of framing (role, separators); ``MESSAGE_OVERHEAD`` adds them.
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable, Iterable

MESSAGE_OVERHEAD = 4
BYTES_PER_TOKEN = 3
COUNT_CACHE_SIZE = 16_384

# Model-name prefixes and the vocabulary their models use.
_VOCABULARIES: tuple[tuple[str, str], ...] = (
    (r"^(gpt-5|gpt-4o|gpt-4\.1|gpt-4\.5|o1|o3|o4|gpt-oss|chatgpt-4o)", "o200k_base"),
    (r"^(gpt-4|gpt-3\.5|gpt-35)", "cl100k_base"),
)


def estimate_tokens(text: str) -> int:
    """The stated estimate: ceil(UTF-8 bytes / 3)."""
    return -(-len(text.encode()) // BYTES_PER_TOKEN)


def vocabulary_for(model: str) -> str | None:
    """The vocabulary of ``model`` shipped in an installed package, or None (then the estimate counts)."""
    name = model.lower().rsplit("/", 1)[-1]
    for pattern, vocabulary in _VOCABULARIES:
        if re.match(pattern, name):
            return vocabulary
    return None


@functools.cache
def _encoder(vocabulary: str) -> Callable[[str], int] | None:
    with warnings.catch_warnings():
        # Its resource loading uses an importlib API that newer Pythons deprecate; harmless here.
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            # Imported on first use: the tokenizer's native library is large and only counting needs it.
            import bpe_openai
        except ImportError:
            return None
        encoding = bpe_openai.get_encoding(vocabulary)
        encoding.encode_ordinary("")  # loads the vocabulary now

    # Every prompt of a session counts the same earlier turns again: remember recent counts by text.
    @functools.lru_cache(maxsize=COUNT_CACHE_SIZE)
    def count(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    return count


def token_counter(model: str) -> Callable[[str], int]:
    """A function counting ``model``'s tokens in a text: exact where its vocabulary is installed, else the
    estimate."""
    vocabulary = vocabulary_for(model)
    encoder = _encoder(vocabulary) if vocabulary else None
    return encoder or estimate_tokens


def counter_name(model: str) -> str:
    """What counts ``model``'s tokens, as health and the README name it."""
    vocabulary = vocabulary_for(model)
    if vocabulary and _encoder(vocabulary) is not None:
        return vocabulary
    return f"estimate (bytes/{BYTES_PER_TOKEN}, rounded up)"


def messages_tokens(messages: Iterable[dict[str, str]], count: Callable[[str], int]) -> int:
    """The tokens chat messages cost: their contents and each message's framing."""
    return sum(count(m["content"]) + MESSAGE_OVERHEAD for m in messages)
