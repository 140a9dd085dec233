"""``manage.py tess_vapid_keys``: make a VAPID key pair for Web Push and print it as settings."""

from __future__ import annotations

import base64
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.core.management.base import BaseCommand


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


class Command(BaseCommand):
    help = "Print a new VAPID key pair (P-256) as TESS_VAPID_PUBLIC_KEY / TESS_VAPID_PRIVATE_KEY lines."

    def handle(self, *args: Any, **options: Any) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        private = key.private_numbers().private_value.to_bytes(32, "big")
        public = key.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)
        self.stdout.write(f"TESS_VAPID_PUBLIC_KEY={_b64url(public)}")
        self.stdout.write(f"TESS_VAPID_PRIVATE_KEY={_b64url(private)}")
