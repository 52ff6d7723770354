"""Sandbox state: the audit log, checkpoints, resets between episodes, the workspace export, the task's actors."""
