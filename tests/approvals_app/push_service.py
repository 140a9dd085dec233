"""A local stand-in for a browser vendor's push service, reached over real HTTP.

It does what a push service does with a message before it reaches the browser: checks the VAPID
``Authorization: vapid t=<JWT>, k=<public key>`` header (RFC 8292: an ES256 JWT whose ``aud`` is the
endpoint's origin, with ``exp`` within 24 hours and a ``sub``), and it does what the browser then does:
decrypts the ``aes128gcm`` body with the subscription's private key and auth secret (RFC 8188, RFC 8291).
The subscription is made here as a browser makes one: a P-256 key pair and a 16-byte auth secret.
"""

from __future__ import annotations

import base64
import json
import os
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _hkdf(salt: bytes, ikm: bytes, info: bytes, length: int) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


@dataclass
class BrowserSubscription:
    """What ``PushManager.subscribe()`` makes in a browser: the receiver's key pair and auth secret."""

    endpoint: str
    private_key: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))
    auth: bytes = field(default_factory=lambda: os.urandom(16))

    @property
    def public_bytes(self) -> bytes:
        return self.private_key.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint)

    def to_json(self) -> dict[str, Any]:
        return {"endpoint": self.endpoint, "keys": {"p256dh": b64url(self.public_bytes), "auth": b64url(self.auth)}}

    def decrypt(self, body: bytes) -> bytes:
        """RFC 8291 §3.4 and RFC 8188 §2: one aes128gcm record, sender's public key as the key id."""
        salt, record_size, id_length = body[:16], int.from_bytes(body[16:20], "big"), body[20]
        sender_public = body[21 : 21 + id_length]
        ciphertext = body[21 + id_length :]
        assert id_length == 65 and len(ciphertext) <= record_size
        sender = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), sender_public)
        shared = self.private_key.exchange(ec.ECDH(), sender)
        ikm = _hkdf(self.auth, shared, b"WebPush: info\x00" + self.public_bytes + sender_public, 32)
        key = _hkdf(salt, ikm, b"Content-Encoding: aes128gcm\x00", 16)
        nonce = _hkdf(salt, ikm, b"Content-Encoding: nonce\x00", 12)
        padded = AESGCM(key).decrypt(nonce, ciphertext, None)
        unpadded = padded.rstrip(b"\x00")
        assert unpadded.endswith(b"\x02"), "the last record ends with the 0x02 delimiter"
        return unpadded[:-1]


@dataclass
class Delivered:
    path: str
    headers: dict[str, str]
    claims: dict[str, Any]
    vapid_key: str
    body: bytes


class PushService:
    """``http://127.0.0.1:<port>/push/<name>``; ``/gone/<name>`` answers 410 like an expired subscription."""

    def __init__(self, vapid_public_key: str) -> None:
        self.vapid_public_key = vapid_public_key
        self.delivered: list[Delivered] = []
        self.refused: list[str] = []
        service = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.path.startswith("/gone/"):
                    self.send_response(410)
                    self.end_headers()
                    return
                try:
                    headers = {name.lower(): value for name, value in self.headers.items()}
                    claims, key = service.verify(headers, f"http://{headers['host']}")
                except (AssertionError, InvalidSignature, KeyError, ValueError) as exc:
                    service.refused.append(repr(exc))
                    self.send_response(401)
                    self.end_headers()
                    return
                service.delivered.append(Delivered(self.path, headers, claims, key, body))
                self.send_response(201)
                self.send_header("Location", f"/message/{len(service.delivered)}")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> PushService:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def verify(self, headers: dict[str, str], origin: str) -> tuple[dict[str, Any], str]:
        """RFC 8292: the ES256 JWT in ``Authorization: vapid t=…, k=…``, signed by the server's VAPID key.

        ``headers`` has lower-case names."""
        scheme, _, params = headers["authorization"].partition(" ")
        assert scheme.lower() == "vapid", scheme
        values = dict(part.strip().split("=", 1) for part in params.split(","))
        token, key = values["t"], values["k"]
        assert key == self.vapid_public_key, "signed with another key than the server's VAPID key"
        head, payload, signature = token.split(".")
        assert json.loads(unb64url(head)) == {"typ": "JWT", "alg": "ES256"}
        raw = unb64url(signature)
        assert len(raw) == 64
        public = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), unb64url(key))
        der = encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big"))
        public.verify(der, f"{head}.{payload}".encode(), ec.ECDSA(hashes.SHA256()))
        claims = json.loads(unb64url(payload))
        assert claims["aud"] == origin, claims
        assert time.time() < claims["exp"] <= time.time() + 24 * 3600, claims
        assert claims["sub"].startswith(("mailto:", "https:")), claims
        assert headers.get("content-encoding") == "aes128gcm"
        assert "ttl" in headers
        return claims, key
