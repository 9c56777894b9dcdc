"""Empirical privacy audits: worst-case neighbours, many runs, a confidence bound on ε."""

from .runner import AUDITABLE, AuditResult, audit
from .scenarios import Scenario, scenarios_for
from .stats import EpsilonBound, best_event_bound, clopper_pearson, epsilon_lower_bound

__all__ = ["AUDITABLE", "AuditResult", "EpsilonBound", "Scenario", "audit", "best_event_bound",
           "clopper_pearson", "epsilon_lower_bound", "scenarios_for"]
