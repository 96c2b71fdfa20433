"""One offline token estimate shared by every prompt-size number Switchboard reports.

``ceil(chars / 4)`` is the rule of thumb OpenAI documents for English text with its BPE
tokenizers; it needs no tokenizer download and is consistent across providers, which matters
more here than per-model exactness (comparisons, budgets and traces all use this one function).
"""

from __future__ import annotations

import math


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / 4)
