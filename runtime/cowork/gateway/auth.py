"""Per-sandbox bearer tokens: made once by ``cowork up --http``, kept on the host only as a
SHA-256 hash in the sandbox's run dir, so removing the sandbox (``cowork down``, the reaper)
removes its run dir and with it the only thing that could accept the token."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path

#: The hash file, in the run dir (root-only inside the sandbox: the agent can neither read
#: nor plant it, see tests/integration/test_gateway.py).
TOKEN_FILE = "gateway-token.json"
#: 32 random bytes: guessing is out of reach, so no rate limit is needed for safety.
TOKEN_BYTES = 32
#: Far above the few dozen bytes written; a larger file is not ours.
_MAX_FILE_BYTES = 4096


def digest(token: str) -> str:
    """The stored form of a token: hex SHA-256 (the token itself is never written)."""
    return hashlib.sha256(token.encode()).hexdigest()


def issue(run_dir: Path) -> str:
    """Make a fresh token for the sandbox whose run dir is ``run_dir``; replaces any earlier one.

    The hash is written to a private temporary file (mode 0600, created exclusively) and
    renamed into place, so a reader never sees half a file.

    Returns:
        The token, to show once; it cannot be recovered from what is stored.

    Raises:
        OSError: when the run dir cannot be written.
    """
    token = secrets.token_urlsafe(TOKEN_BYTES)
    data = json.dumps({"sha256": digest(token)}).encode()
    tmp = run_dir / f".{TOKEN_FILE}.{secrets.token_hex(6)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, run_dir / TOKEN_FILE)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return token


def _stored_digest(run_dir: Path) -> tuple[str | None, str]:
    """The stored hash, or None and why not. A file that is a link, not ours, open to others
    or malformed counts as no token (fail closed)."""
    try:
        fd = os.open(run_dir / TOKEN_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None, "no token issued for this sandbox (or it was removed)"
    except OSError as exc:
        return None, f"token file unreadable ({exc.strerror})"
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
            return None, "token file refused (not a private regular file of this user)"
        raw = fh.read(_MAX_FILE_BYTES + 1)
    try:
        stored = json.loads(raw)["sha256"]
    except (ValueError, KeyError, TypeError):
        return None, "token file malformed"
    if not isinstance(stored, str) or len(stored) != 64:
        return None, "token file malformed"
    return stored, ""


def fingerprint(run_dir: Path, length: int = 12) -> str | None:
    """The start of the stored hash of the sandbox's token (``cowork ps`` shows it to tell
    tokens apart; a prefix of the hash of 32 random bytes tells nothing of the token), or None
    when no valid token is stored."""
    stored, _ = _stored_digest(run_dir)
    return stored[:length] if stored else None


def check(run_dir: Path, token: str) -> str | None:
    """Whether ``token`` opens the sandbox whose run dir is ``run_dir``; read from disk on
    every call, so a removed sandbox's token stops working at once.

    Returns:
        None when it does, else the reason it does not (for the refusal log; never shown to
        the caller).
    """
    stored, why = _stored_digest(run_dir)
    if stored is None:
        return why
    # Equal-length hex strings compared in constant time: the time taken says nothing of
    # how much of the hash matched.
    if not hmac.compare_digest(stored.encode(), digest(token).encode()):
        return "wrong token"
    return None
