"""File access as the agent (a thread pool, or a fork per call under gVisor), safe opening, and bounded walks."""
