"""Analysis: MMRB2 scoring, Best-of-N metrics, correlations, figures and reports."""
