"""The gateway behind ``cowork serve``: running sandboxes as streamable-HTTP MCP endpoints for
remote clients, each behind its own bearer token (see docs/gateway.md)."""

from .auth import TOKEN_FILE, check, issue
from .proxy import Gateway

__all__ = ["TOKEN_FILE", "Gateway", "check", "issue"]
