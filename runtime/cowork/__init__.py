"""cowork: containerized sandboxes with MCP-served work environments for AI coworker agents.

This module stays import-light: it is also loaded inside the sandbox container, where
only ``cowork.formats`` and ``cowork.server`` (and later ``cowork.services``) exist.
"""

__version__ = "0.1.0"
