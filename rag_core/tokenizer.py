"""Text → stemmed terms with stable ids, shared by the document and query sides of BM25."""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache

import mmh3
from py_rust_stemmers import SnowballStemmer

# A compact English stop list (NLTK's core set); question words stay out of it on purpose
# only where they carry no topic signal.
STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not of off on once only or other our ours ourselves out over
    own same she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while who
    whom why will with would you your yours yourself yourselves s t don ll m re ve d y
    """.split()
)

_WORD = re.compile(r"\w+", re.UNICODE)
_STEMMER = SnowballStemmer("english")


@lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _STEMMER.stem_word(word)


def tokenize(text: str) -> list[str]:
    """Lowercase, split on non-word characters, drop stop words and underscores, stem."""
    terms = []
    for word in _WORD.findall(text.lower()):
        if word in STOP_WORDS or word.strip("_") == "":
            continue
        terms.append(_stem(word))
    return terms


@lru_cache(maxsize=200_000)
def term_id(term: str) -> int:
    """A stable unsigned 32-bit id (Qdrant sparse indices are uint32)."""
    return mmh3.hash(term, signed=False)


def term_counts(text: str) -> Counter[str]:
    return Counter(tokenize(text))
