"""Which agent is calling: the identity the host's transport reads from a request's ``_meta``.

A harness (cowork.agents.harness) runs a main agent and subagents in one sandbox; the host
names the agent behind each ``tools/call`` in its ``_meta`` (formats.AGENT_META) on the
root-only rpc.sock. The rpc server sets :data:`AGENT` for the call's duration, the audit
writes it into every record made meanwhile, and a grant (``tools``) is enforced there, so
the python tool's inner calls carry the same identity and the same grant.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

#: The identity of the agent whose call runs now (formats.agent_identity's shape), or None:
#: a call no harness attributed (a single agent, or an outside client on mcp.sock).
AGENT: ContextVar[dict[str, Any] | None] = ContextVar("cowork_agent", default=None)
