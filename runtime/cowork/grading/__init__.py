"""Graders: judge an episode from its evidence (audit log, final workspace, trace)."""

from .checks import BY_ID, CHECKS
from .grade import CheckResult, Grade, grade

#: Every check type the grader knows.
CHECK_TYPES = sorted({*CHECKS, *BY_ID})

__all__ = ["CHECK_TYPES", "CheckResult", "Grade", "grade"]
