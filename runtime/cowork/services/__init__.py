"""Mock work services (mail, calendar, CRM, tickets, ...) served as MCP tools inside the sandbox.

``catalog`` is pure data and safe to import anywhere; the rest runs inside the container.
"""
