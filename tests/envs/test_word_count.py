"""The default word counter: ``len(text.split())`` exactly, ASCII fast path or not, and the
env's context count built from it."""

import random

import pytest

from searchgym.corpora.types import Hit, Passage, QAExample
from searchgym.envs.components.frozen import make_frozen
from searchgym.envs.components.summarizers import make_summarizer
from searchgym.envs.protocols import PROTOCOLS, Answer, Search, make_protocol
from searchgym.envs.single.game import SearchGame
from searchgym.envs.single.tasks import count_tokens
from searchgym.rewards import make_recipe

# ASCII word characters, every ASCII character str.split() splits on, and non-ASCII ones:
# letters, a no-break space, an ideographic space and U+0085 (all three split on too).
ALPHABET = ["a", "Z", "7", " ", "\n", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x1f", "é", "\u2013", "\xa0", "\u3000", "\x85"]


def random_text(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(n))


def test_count_tokens_equals_split_on_ascii_and_unicode_text():
    rng = random.Random(0)
    for _ in range(5000):
        text = random_text(rng, rng.randint(0, 30))
        ascii_text = text.encode("ascii", "ignore").decode()
        assert count_tokens(text) == len(text.split()), repr(text)
        assert count_tokens(ascii_text) == len(ascii_text.split()), repr(ascii_text)


class TrickyRetriever:
    """Passages whose text starts or ends inside a word, holds Unicode spaces or is empty."""

    TEXTS = ["plain ascii text.", "  leading and trailing spaces \n", "glued\xa0by a no-break space",
             "", "Zürich – a city\u3000with an ideographic space", "x"]

    def search(self, queries, k):
        passages = [Passage(f"p{i}", f"T{i}", text) for i, text in enumerate(self.TEXTS)]
        return [[Hit(p, 1.0) for p in passages[:k]] for _ in queries]


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_context_tokens_count_every_word_the_agent_saw(protocol):
    if protocol == "s3":
        recipe = make_recipe("s3_gbr", generator=make_frozen("generator", "gold-span"))
    else:
        recipe = make_recipe("search_r1_em")
    game = SearchGame(make_protocol(protocol), TrickyRetriever(), make_summarizer(None), recipe, top_k=6, max_turns=4)
    prompt, info = game.reset(QAExample("q", "Which city?", ("Zürich",)))
    for action in ([Search("city")], [Search("space")]):
        game.step(game.protocol.write(action))
    _, _, _, _, info = game.step(game.protocol.write([Answer("Zürich")]) if protocol != "s3" else "<search_complete>True</search_complete>")
    seen = [prompt] + [piece for turn in game.turns for piece in turn]
    assert info["context_tokens"] == sum(len(piece.split()) for piece in seen)
    assert any("\u3000" in piece for piece in seen)  # the tricky passages were shown
