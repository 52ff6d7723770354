"""The gateway behind ``cowork serve``: running sandboxes as streamable-HTTP MCP endpoints for
remote clients, each behind its own bearer token (see docs/gateway.md)."""

from .proxy import Gateway
from .tokens import TOKEN_FILE, check, issue

__all__ = ["TOKEN_FILE", "Gateway", "check", "issue"]
