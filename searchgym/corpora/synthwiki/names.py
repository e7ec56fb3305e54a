"""Invented names for the synthwiki world.

Every name is built from syllables by a small regular grammar::

    name = onset vowel [mid_coda onset vowel] last_coda ending

where the ending depends on what is being named (a place, a surname, a given name...).
The grammar reaches tens of millions of names, so a world of a million passages still
draws its few hundred thousand names without running dry.

Two rules keep the names safe to ask questions about:

* **Unique.** :class:`NameForge` never hands out the same name twice, and it compares
  names by their English Snowball stem, so a retriever that stems (``"Dravas"`` and
  ``"Drava"`` both become ``drava``) still sees every name as a distinct word.
* **Not real.** A name the grammar can produce but that is an English word or a real
  name (``"Doran"``, ``"Marin"``, ``"Bergen"``...) is refused. :data:`BLOCKED` lists every
  word of a large reference vocabulary (the lead summaries of the 10,033 "vital"
  Wikipedia articles) that :func:`could_generate` accepts; the tests recompute that list
  from the vocabulary and check it is still complete whenever the grammar changes.
"""

from __future__ import annotations

import re

import numpy as np
import Stemmer

from searchgym.corpora.synthwiki._blocklist import BLOCKED_WORDS
from searchgym.error import ConfigError

__all__ = ["BLOCKED", "ENDINGS", "NameForge", "could_generate"]

ONSETS = ("b", "br", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "pr",
          "r", "s", "sk", "st", "t", "th", "tr", "v", "vr", "z")
# Repeated vowels make them more frequent; "ae"/"ei" give a less English texture.
VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "a", "i", "ae", "ei")
MID_CODAS = ("", "", "", "", "", "l", "n", "r", "s", "m")
# Single consonants are listed twice so that heavy clusters stay occasional.
LAST_CODAS = ("l", "n", "r", "s", "m", "v", "d", "k", "l", "n", "r", "s", "m", "v", "d", "k",
              "th", "sk", "nd", "rn", "lv", "rd")

#: Endings per kind of name. Every ending starts with a vowel because the stem always
#: ends with a consonant (``last_coda``), which keeps the names pronounceable.
ENDINGS: dict[str, tuple[str, ...]] = {
    "place": ("a", "ia", "or", "en", "ar", "eth", "ovo", "isk", "ira", "und", "esh", "avel",
              "ova", "ith", "ara", "orn", "ago", "ost", "enth", "uvia"),
    "core": ("ex", "ano", "ivo", "ento", "ara", "ova", "elt", "usk", "ondo", "ekka", "orre", "ais"),
    "surname": ("enko", "ovic", "ani", "esku", "ath", "orin", "evar", "ard", "elli", "ander",
                "ova", "ek", "ay", "ossi", "essen", "uro"),
    "given_male": ("ar", "en", "or", "ik", "el", "ir", "o", "an", "ert", "as", "eth"),
    "given_female": ("a", "ia", "ella", "iya", "ora", "enna", "ay", "ayn", "essa", "ith"),
    "river": ("a", "ava", "un", "ais", "ora", "ith"),
    "continent": ("aria", "ovia", "essa", "antis", "ora", "ael"),
}

# How often a stem has one syllable rather than two, per kind. Given names are short and
# drawn from a small pool; places and organisations need the large two-syllable space.
_ONE_SYLLABLE_SHARE = {"given_male": 0.5, "given_female": 0.5, "surname": 0.15, "river": 0.5}
_DEFAULT_ONE_SYLLABLE_SHARE = 0.1
_MIN_LENGTH, _MAX_LENGTH = 4, 11
# Substrings that would make an unfortunate name in an encyclopedia.
_UNSEEMLY = re.compile(
    "anus|bum|butt|cock|crap|cum|cunt|dick|dildo|fag|fart|fuck|kill|nazi|nig|penis|piss|poo|"
    "porn|puss|rape|semen|sex|shit|slut|sperm|stink|tit|turd|vulv|whor"
)


def _alternation(parts: tuple[str, ...]) -> str:
    unique = sorted({p for p in parts if p}, key=lambda p: (-len(p), p))
    return "(?:" + "|".join(unique) + ")"


_GRAMMAR = re.compile(
    "^{o}{v}(?:{m}?{o}{v})?{c}{e}$".format(
        o=_alternation(ONSETS),
        v=_alternation(VOWELS),
        m=_alternation(MID_CODAS),
        c=_alternation(LAST_CODAS),
        e=_alternation(tuple(e for endings in ENDINGS.values() for e in endings)),
    )
)


def could_generate(word: str) -> bool:
    """Whether the grammar can produce ``word`` (lowercase), whatever the kind of name."""
    return _GRAMMAR.match(word) is not None


#: Real words the grammar could produce; :class:`NameForge` never hands them out.
BLOCKED: frozenset[str] = frozenset(BLOCKED_WORDS.split())


class NameForge:
    """Draws unique invented names from a seeded ``numpy.random.Generator``.

    One forge serves a whole world, so a name given to a city is never given to a
    company, a river or a family.
    """

    def __init__(self, rng: np.random.Generator):
        self._rng = rng
        self._stemmer = Stemmer.Stemmer("english")
        self._taken: set[str] = set()

    def take(self, count: int, kind: str) -> list[str]:
        """``count`` new capitalised names of ``kind`` (a key of :data:`ENDINGS`)."""
        if kind not in ENDINGS:
            raise ConfigError(f"NameForge.take expects kind in {sorted(ENDINGS)}, got {kind!r}.")
        names: list[str] = []
        attempts = 0
        while len(names) < count:
            attempts += 1
            if attempts > 50:
                # Only reachable if a world asks for more names than the grammar holds.
                raise ConfigError(
                    f"Could not invent {count} unique {kind} names (got {len(names)}); "
                    "expected a world small enough for the name grammar. Ask for fewer passages."
                )
            batch = self._draw(count - len(names), kind)
            for word, stem in zip(batch, self._stemmer.stemWords(batch)):
                if stem in self._taken or word in BLOCKED or not _MIN_LENGTH <= len(word) <= _MAX_LENGTH:
                    continue
                if _UNSEEMLY.search(word):
                    continue
                self._taken.add(stem)
                names.append(word.capitalize())
                if len(names) == count:
                    break
        return names

    def _draw(self, need: int, kind: str) -> list[str]:
        """About ``need`` candidate names (lowercase), duplicates and real words included."""
        size = need + need // 4 + 16
        rng = self._rng
        endings = ENDINGS[kind]
        one = rng.random(size) < _ONE_SYLLABLE_SHARE.get(kind, _DEFAULT_ONE_SYLLABLE_SHARE)
        o1, o2 = rng.integers(len(ONSETS), size=(2, size)).tolist()
        v1, v2 = rng.integers(len(VOWELS), size=(2, size)).tolist()
        mid = rng.integers(len(MID_CODAS), size=size).tolist()
        last = rng.integers(len(LAST_CODAS), size=size).tolist()
        end = rng.integers(len(endings), size=size).tolist()
        out = []
        for i, single in enumerate(one.tolist()):
            head = ONSETS[o1[i]] + VOWELS[v1[i]]
            if not single:
                head += MID_CODAS[mid[i]] + ONSETS[o2[i]] + VOWELS[v2[i]]
            out.append(head + LAST_CODAS[last[i]] + endings[end[i]])
        return out
