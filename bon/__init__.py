"""bon: Best-of-N validation toolkit for Multimodal RewardBench 2."""

__version__ = "0.1.0"
