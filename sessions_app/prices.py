"""The price table (``TESS_MODEL_PRICES``): what a million tokens of each kind cost per model, used only for
steps whose source reported tokens without a cost."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

TOKEN_KINDS = ("input", "output", "cache_read", "cache_write")
PER = Decimal(1_000_000)


@dataclass(frozen=True)
class Price:
    per_million: dict[str, Decimal]
    currency: str


def price_table() -> dict[str, Price]:
    """``TESS_MODEL_PRICES`` checked: every price a non-negative decimal, a three-letter currency."""
    table: dict[str, Price] = {}
    raw = settings.TESS_MODEL_PRICES
    if not isinstance(raw, dict):
        raise ImproperlyConfigured("TESS_MODEL_PRICES must be an object of models.")
    for model, entry in raw.items():
        if not isinstance(entry, dict):
            raise ImproperlyConfigured(f"TESS_MODEL_PRICES[{model!r}] must be an object.")
        currency = entry.get("currency", "USD")
        if not (isinstance(currency, str) and len(currency) == 3 and currency.isalpha()):
            raise ImproperlyConfigured(f"TESS_MODEL_PRICES[{model!r}]['currency'] must be a code such as USD.")
        prices: dict[str, Decimal] = {}
        for kind in TOKEN_KINDS:
            try:
                prices[kind] = Decimal(str(entry.get(kind, "0")))
            except InvalidOperation:
                prices[kind] = Decimal(-1)
            if not prices[kind].is_finite() or prices[kind] < 0:
                raise ImproperlyConfigured(f"TESS_MODEL_PRICES[{model!r}][{kind!r}] must be a price of 0 or more.")
        table[str(model)] = Price(prices, currency.upper())
    return table
