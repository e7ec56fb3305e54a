"""R-Search's format reward pays any well-formed answer, a wrong or garbage one included (issue
55, item 8), because the paper's Eq. 5 does: its answer indicator asks only whether "the answer
is well-formatted", and without a search the evidence term is paid outright. These tests pin the
behaviour to the paper's words and play it through the env in tags and as tool calls."""

import pytest
from paper_text import needs_papers, paper_text

from searchgym.rewards import Episode, GoldSpanReader, RSearchReward, Turn
from tool_helpers import make_env

GARBAGE = "zqx vrrp blorf"

#: The paper's words that decide it (§3.2.2, "Format reward", and the lines under Eq. 5).
QUOTES = (
    "we require the final answer",
    "to be enclosed in exactly one <answer> and </answer> box",
    "indicator functions denoting whether retrieval is triggered, the answer is well-formatted, "
    "and the evidence is well-formatted, respectively",
)


@needs_papers
def test_the_papers_format_reward_asks_only_for_the_form_of_the_answer():
    text = paper_text("R-Search").replace("\\_", "_")
    for quote in QUOTES:
        assert quote in text, quote
    # Eq. 5: r_f = (1 - I_S)(γ_e + γ_a I_A) + I_S(γ_e I_E + γ_a I_A); no term reads the answer's content.
    assert "(1 - \\mathbb{I}_{\\mathcal{S}})(\\gamma_{e} + \\gamma_{\\alpha} \\cdot \\mathbb{I}_{\\mathcal{A}})" in text


def episode(answer, *, searched):
    turns = [Turn("<search> q </search>", ("search",), ("documents",))] if searched else []
    turns.append(Turn(f"<answer> {answer} </answer>", ("answer",), ()))
    return Episode(question="What is the capital of France?", answers=("Paris",), turns=tuple(turns), answer=answer,
                   num_searches=int(searched), observations=["<observation>Paris is the capital of France.</observation>"] * searched)


@pytest.mark.parametrize("options", [{}, {"grounded": False, "paper_format_rule": True, "strict": False}],
                         ids=["default", "paper exactly"])
def test_a_garbage_answer_earns_the_format_reward_of_eq5(options):
    recipe = RSearchReward(GoldSpanReader(), **options)
    # No search: (1 - I_S)(γ_e + γ_a I_A) = 0.2 + 0.2, whatever the answer says.
    no_search = recipe.score(episode(GARBAGE, searched=False))
    assert no_search.total == pytest.approx(0.4)
    assert (no_search.components["answer_f1"], no_search.components["answer_format"]) == (0.0, 1.0)
    # A search and no evidence: I_S(γ_e I_E + γ_a I_A) = 0.2.
    assert recipe.score(episode(GARBAGE, searched=True)).total == pytest.approx(0.2)
    # The same answer, right: the format reward is the same and the F1 adds to it.
    assert recipe.score(episode("Paris", searched=False)).total == pytest.approx(1.4)


@pytest.mark.parametrize("action_format", ["tags", "tools"])
def test_the_env_pays_it_in_tags_and_as_tools_alike(action_format):
    env = make_env("searchgym/RSearch-v0", action_format, recipe="r_search")
    env.reset(seed=3)
    action = f"<answer> {GARBAGE} </answer>" if action_format == "tags" else \
        {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "answer", "arguments": {"answer": GARBAGE}}}]}
    _, reward, terminated, _, info = env.step(action)
    assert terminated and reward == pytest.approx(0.4)
    assert info["reward_components"]["answer_format"] == 1.0 and info["reward_components"]["answer_f1"] == 0.0
