"""Shared by the bench scripts: queries made from the awsdocs dev questions, and percentiles."""

from __future__ import annotations

import json
import random
from pathlib import Path


def queries_from_dev(path: Path, n: int = 100, seed: int = 7) -> list[str]:
    """The dev questions, then random word runs of them, ``n`` in all (deterministic)."""
    qs = [json.loads(line)["question"] for line in path.read_text().splitlines() if line.strip()]
    rnd = random.Random(seed)
    out = list(qs)
    while len(out) < n:
        words = rnd.choice(qs).split()
        k = rnd.randint(2, max(2, len(words)))
        start = rnd.randint(0, len(words) - k)
        out.append(" ".join(words[start : start + k]))
    return out[:n]


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]
