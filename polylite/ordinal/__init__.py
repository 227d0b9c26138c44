"""Ordinal regression (ratings, relevance levels) on the multi-output models:
:class:`OrdinalMcRankRegressor`, the McRank reduction (NIPS 2017, section 6.5)."""
from .mcrank import OrdinalMcRankRegressor

__all__ = ["OrdinalMcRankRegressor"]
