"""The offline demo study: ``configs/demo.yaml`` as code, so ``bon demo`` needs no file on disk.

``tests/test_config.py`` checks that the two describe the same study.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bon.config import StudyConfig, parse_config
from bon.tasks import TASK_NAMES

# The first two share the verifier's scoring code (generators.synthetic.checks), as a GPT-4.1 judge
# shares GPT-4.1 with a GEdit-Bench grader: realistic, and it inflates their Best-of-N gain. Their
# labels say so, and the report flags them (matching ``grader_family``) with their residual.
DEMO_JUDGES: list[str | dict[str, str]] = [
    {"name": "scene-full", "label": "verifier-twin"},
    {"name": "scene-lowres", "label": "verifier-twin-32px"},
    "colour-hist", "ocr", "quality", "text-overlap", "position-bias", "image-bias", "random",
]


def demo_raw(out: Path = Path("runs/demo"), prompts: int = 40, n: int = 8, seed: int = 0, strategy: str = "knockout") -> dict[str, Any]:
    return {
        "out": str(out),
        "seed": seed,
        "n": n,
        "tasks": list(TASK_NAMES),
        "suite": {"name": "synthetic", "per_task": prompts},
        "preference": {"prompts_per_task": prompts, "pairs_per_prompt": 4, "margin": 0.25, "annotators": 3},
        "generators": [
            {"name": "synthetic", "label": "strong", "options": {"skill": "strong"}},
            {"name": "synthetic", "label": "weak", "options": {"skill": "weak"}},
        ],
        "verifier": {"name": "synthetic"},
        "strategy": {"name": strategy},
        "judges": [dict(j) if isinstance(j, dict) else j for j in DEMO_JUDGES],
    }


def demo_config(**kwargs: Any) -> StudyConfig:
    return parse_config(demo_raw(**kwargs), where="bon demo")
