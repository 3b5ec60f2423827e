"""Selection strategies: pick one of a prompt's N candidates by asking the referee for matches.

A strategy is a *bracket*: a generator that yields lists of ``(x, y)`` matches that are ready to be
played, receives their results, and finally returns the winner's index. The driver plays the ready
matches of every prompt at once, so a judge always gets the largest possible batch.
"""

from bon.selection.base import Pick, Strategy, run_selection

PLUGINS = {
    "knockout": "bon.selection.knockout:Knockout",
    "round-robin": "bon.selection.round_robin:RoundRobin",
    "pointwise": "bon.selection.pointwise:Pointwise",
    "uncertainty": "bon.selection.uncertainty:Uncertainty",
}

__all__ = ["PLUGINS", "Pick", "Strategy", "run_selection"]
