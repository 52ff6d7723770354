"""Graders: judge an episode from its evidence (audit log, final workspace, trace)."""

from .grade import CheckResult, Grade, grade

__all__ = ["CheckResult", "Grade", "grade"]
