"""Signing commands for direct log producers (Ed25519): keys on disk and signed records.

A producer that writes to the commands log itself (a Kafka client) wraps each command in a
``signed`` record. The governor verifies it against the keys admins registered in the log
(:mod:`claimgraph.core.governor.authority`)::

    signer = Signer.generate("release-bot-1")          # or Signer.load(path, key_id)
    g.register_key(signer.key_id, "release-agent", signer.public_bytes, agent="admin")
    record = signer.sign(command)                        # bytes for the commands log

Private keys are PEM (PKCS#8) files created with mode 600; they are never logged.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, cast

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from claimgraph.core.governor.authority import CONTEXT
from claimgraph.core.model import Command
from claimgraph.core.wire import encode_command
from claimgraph.errors import ConfigError

__all__ = ["Signer"]


class Signer:
    """An Ed25519 private key with the id it is registered under."""

    def __init__(self, key_id: str, key: Ed25519PrivateKey) -> None:
        self.key_id = key_id
        self._key = key

    def __repr__(self) -> str:
        return f"Signer({self.key_id!r})"  # never the key

    @classmethod
    def generate(cls, key_id: str) -> Signer:
        return cls(key_id, Ed25519PrivateKey.generate())

    @classmethod
    def load(cls, path: str | Path, key_id: str | None = None) -> Signer:
        """Load a PEM private key; the key id defaults to the file's stem."""
        p = Path(path)
        try:
            key = serialization.load_pem_private_key(p.read_bytes(), password=None)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load a signing key from {p}: {exc}") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise ConfigError(f"{p} is not an Ed25519 private key")
        return cls(key_id or p.stem, key)

    def save(self, path: str | Path) -> None:
        """Write the private key as PEM with mode 600."""
        pem = self._key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)

    @property
    def public_bytes(self) -> bytes:
        """The raw 32-byte public key, as ``register_key`` takes it."""
        return self._key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )

    def sign(self, command: Command | bytes) -> bytes:
        """The ``signed`` record wrapping ``command`` (a dict, or its encoding)."""
        body = command if isinstance(command, bytes) else encode_command(command)
        record: dict[str, Any] = {
            "type": "signed",
            "key_id": self.key_id,
            "signature": self._key.sign(CONTEXT + body),
            "body": body,
        }
        return encode_command(cast(Command, record))
