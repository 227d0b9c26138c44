"""Ranking from positive-only interactions: factorization machines of any degree trained
by pairwise losses (BPR, WARP) with sampled negatives."""
from .fm import FactorizationMachineRanker

__all__ = ["FactorizationMachineRanker"]
