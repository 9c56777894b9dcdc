"""Empirical privacy audits: worst-case neighbours, many runs, a confidence bound on ε."""

from .stats import EpsilonBound, best_event_bound, clopper_pearson, epsilon_lower_bound

__all__ = ["EpsilonBound", "best_event_bound", "clopper_pearson", "epsilon_lower_bound"]
