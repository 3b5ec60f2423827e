"""MMRB2, the benchmark bon validates against: its file formats, its official scorer and its hub fetcher.

``format`` reads and writes task files and judgment files, ``scorer`` holds the official accuracy
rules and matches judgment files to tasks, ``fetch`` (imported on demand) builds the official folder
layout from the Hugging Face copy. The common names are re-exported here.
"""

from bon.mmrb2.format import (
    Pair,
    find_task_file,
    has_task_file,
    load_judgments,
    load_pairs,
    read_json,
    write_judgments,
    write_pairs,
)
from bon.mmrb2.scorer import (FLIP, accuracy, assign_predictions, evaluate, first_judgement, one_file_per_task, overall,
                               task_pair_ids)

__all__ = [
    "FLIP", "Pair", "accuracy", "assign_predictions", "evaluate", "find_task_file", "first_judgement", "has_task_file", "load_judgments",
    "load_pairs", "one_file_per_task", "overall", "read_json", "task_pair_ids", "write_judgments", "write_pairs",
]
