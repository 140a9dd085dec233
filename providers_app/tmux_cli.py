"""Talking to one tmux server on a private socket: argument lists only, a timeout on every call.

Nothing here goes through a shell of ours (``subprocess.run`` with a list). Failures become the
contract's typed errors: a dead server or a timeout is ``ProviderUnavailable`` (tasks retry those), a
missing target is ``RuntimeNotFound``, a clash is ``ProviderConflict``.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from .contract import ProviderConflict, ProviderError, ProviderUnavailable, RuntimeNotFound

logger = logging.getLogger(__name__)

# tmux's answers when nothing listens on the socket ("no server running on …", "error connecting to …").
_SERVER_GONE = ("no server running", "error connecting to", "server exited unexpectedly")
_NOT_FOUND = ("can't find session", "can't find window", "can't find pane", "session not found")
_CONFLICT = ("duplicate session",)

# tmux sends a whole command line to its server in one message of at most 16 KiB; keep literal keys well below.
SEND_KEYS_CHUNK = 4000


class TmuxServerGone(ProviderUnavailable):
    """No tmux server answers on the socket: every session it had is gone for good."""


@dataclass(frozen=True)
class TmuxCli:
    """One tmux server, addressed only by its socket path (``tmux -S``)."""

    socket: Path
    binary: str = "tmux"
    config_file: str = "/dev/null"  # a server we start never reads someone's ~/.tmux.conf
    timeout: float = 5.0

    def argv(self, args: Sequence[str]) -> list[str]:
        return [self.binary, "-f", self.config_file, "-S", str(self.socket), *args]

    def run(self, *args: str) -> str:
        """Run one tmux command (or a ``;``-separated sequence); its stdout, or a typed error."""
        env = {key: value for key, value in os.environ.items() if key not in ("TMUX", "TMUX_PANE")}
        try:
            completed = subprocess.run(  # noqa: S603 - an argument list, never a shell
                self.argv(args),
                capture_output=True,
                timeout=self.timeout,
                env=env,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise ProviderUnavailable(
                "The tmux server did not answer in time.", details={"timeout_seconds": self.timeout}
            ) from exc
        except OSError as exc:  # tmux not installed, not executable
            raise ProviderUnavailable("tmux cannot be run on this machine.", details={"binary": self.binary}) from exc
        stdout = completed.stdout.decode("utf-8", errors="replace")
        if completed.returncode == 0:
            return stdout
        raise classify_failure(completed.stderr.decode("utf-8", errors="replace").strip(), args[0] if args else "")


def classify_failure(stderr: str, command: str) -> ProviderError:
    lowered = stderr.lower()
    details = {"command": command}
    if any(marker in lowered for marker in _SERVER_GONE):
        return TmuxServerGone("No tmux server is running on this provider's socket.", details=details)
    if any(marker in lowered for marker in _NOT_FOUND):
        return RuntimeNotFound(details=details)
    if any(marker in lowered for marker in _CONFLICT):
        return ProviderConflict("tmux refused: the name is taken.", details=details)
    logger.warning("tmux %s failed: %s", command, stderr[:200])
    return ProviderError("tmux refused the command.", details=details)


def parse_rows(stdout: str, fields: Sequence[str]) -> list[dict[str, str]]:
    """Rows of a ``-F`` listing whose fields were joined by tabs (tmux escapes tabs inside names as ``\\t``)."""
    rows = []
    for line in stdout.splitlines():
        values = line.split("\t")
        if len(values) == len(fields):
            rows.append(dict(zip(fields, values, strict=True)))
    return rows


def row_format(fields: Sequence[str]) -> str:
    return "\t".join("#{" + name + "}" for name in fields)
