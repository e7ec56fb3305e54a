"""Doing nothing earns nothing: every registered env with every reward recipe.

An agent that writes text without any protocol tag earns exactly the recipe's floor, and
an agent that copies the prompt's example tags (SmolLM2 answers ``<answer> and </answer>``
from the instructions) earns no more than the same play with a wrong answer.
"""

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from env_helpers import ENV_IDS, make_small
from searchgym.envs.protocols import Answer, Invalid
from searchgym.rewards import RECIPES, GoldSpanReader, span_check

#: The least each recipe pays with its default options (s3_gbr: minus the question's
#: naive-RAG GenAcc, checked separately against the documents of the initial retrieval).
FLOORS = {
    "search_r1_em": 0.0,
    "search_r1_format": 0.0,
    "r1_searcher_stage1": 0.0,
    "r1_searcher_stage2": -2.0,
    "r_search": 0.0,
    "s3_gen_acc": 0.0,
}
#: Components that pay for the answer itself.
ANSWER_CREDIT = ("em", "cover_em", "f1", "answer_f1", "gen_acc")
WRONG = "Zqxwv Plorth"
QUESTIONS = (0, 1, 2)


def make(env_id: str, recipe: str):
    frozen = {"generator": None, "reader": None}  # the registered defaults would not fit every recipe
    frozen.update({role: GoldSpanReader() for role in RECIPES[recipe].needs})
    return make_small(env_id, reward=recipe, **frozen)


def play(env, index: int, policy) -> tuple[float, dict]:
    """Play one episode; ``policy(observation)`` gives each turn. Returns the total reward and
    the last info."""
    obs, info = env.reset(options={"example_index": index})
    total = 0.0
    while True:
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        total += reward
        if terminated or truncated:
            return total, info


def test_every_recipe_and_protocol_is_covered():
    assert set(FLOORS) | {"s3_gbr"} == set(RECIPES)
    protocols = {make_small(env_id).unwrapped.protocol.name for env_id in ENV_IDS}
    assert protocols == {"search_r1", "r1_searcher", "recon", "s3", "r_search"}


tag_free = st.lists(
    st.one_of(
        st.sampled_from(["", "I don't know.", "The answer is Paris.", "search for the founder", "[1, 2]", "True"]),
        st.text(alphabet=st.characters(blacklist_characters="<>", blacklist_categories=("Cs",)), max_size=80),
    ),
    min_size=1,
    max_size=10,
)


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_tag_free_text_earns_exactly_the_floor(env_id, recipe):
    env = make(env_id, recipe)
    inner = env.unwrapped

    @settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(turns=tag_free, index=st.sampled_from(QUESTIONS))
    def check(turns, index):
        said = iter(turns * inner.max_turns)
        total, info = play(env, index, lambda obs: next(said))
        assert info["num_invalid"] == info["turn"], "a tag-free turn must be invalid"
        components = info["reward_components"]
        assert all(components.get(name, 0.0) == 0.0 for name in ANSWER_CREDIT), components
        assert total == inner.recipe.floor(inner.episode())
        if recipe == "s3_gbr":
            question = inner.example
            naive = inner.retriever.search([question.question], inner.initial_top_k)[0]
            baseline = float(any(span_check(f"{h.passage.title}\n{h.passage.text}", question.answers) for h in naive))
            assert components["naive_rag_acc"] == baseline
            assert total == -baseline
        else:
            assert total == FLOORS[recipe]

    check()


#: A tag pair with a short example between (``<answer> and </answer>``), or R1-Searcher's query.
EXAMPLE = re.compile(r"<([a-z_]+)>[^<]{0,80}?</\1>|<\|begin_of_query\|>[^<]{0,200}?<\|end_of_query\|>")


def example_snippets(prompt: str) -> list[str]:
    """The tag examples of a prompt, as a model copying its instructions writes them."""
    snippets = [m.group(0) for m in EXAMPLE.finditer(prompt)]
    assert snippets, prompt
    return [*snippets, "".join(snippets), prompt]


def wrong_instead(protocol, text: str) -> str:
    """The same turn with every answer replaced by a wrong one (written well formed)."""
    actions = protocol.parse(text).actions
    if any(isinstance(a, Invalid) for a in actions):
        return text  # an invalid turn has no answer to replace
    actions = [Answer(WRONG) if isinstance(a, Answer) else a for a in actions]
    return protocol.write(actions, thought="copying the example")


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_copying_the_prompts_example_tags_earns_no_answer_credit(env_id, recipe):
    env = make(env_id, recipe)
    protocol = env.unwrapped.protocol
    prompt, _ = env.reset(options={"example_index": 0})
    snippets = example_snippets(prompt)
    if protocol.name in ("search_r1", "recon", "r_search", "r1_searcher"):
        assert any("<answer>" in s and "</answer>" in s for s in snippets[:-2]), snippets
    for index in QUESTIONS:
        for snippet in snippets:
            copied, copied_info = play(env, index, lambda obs: snippet)
            wrong, wrong_info = play(env, index, lambda obs: wrong_instead(protocol, snippet))
            assert copied <= wrong + 1e-9, (snippet, copied_info["reward_components"], wrong_info["reward_components"])
            for name in ANSWER_CREDIT:
                if name in copied_info["reward_components"]:
                    assert copied_info["reward_components"][name] <= wrong_info["reward_components"][name], (snippet, name)


#: Turns that do nothing through tool calls: bad calls, and replies with neither a call nor
#: answer text (a reply with text and no call is an answer in the answer games).
NOTHING = [
    {"role": "assistant", "content": ""}, "<think>I am not sure.</think>", '<tool_call>{"name": "lookup", "arguments": {}}</tool_call>',
    '<tool_call>{"name": "search", "arguments": {}}</tool_call>', '<tool_call>{"name": "search"', "<tool_response>Paris</tool_response>",
    {"role": "assistant", "tool_calls": [{"function": {"name": "answer", "arguments": {"answer": ""}}}]},
    {"role": "assistant", "tool_calls": [{"function": {"name": "select", "arguments": {"doc_ids": [99]}}}]},
    {"role": "assistant", "tool_calls": "search"}, {"role": "user", "content": "Paris"},
]


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_bad_tool_calls_earn_exactly_the_floor(env_id, recipe):
    from tool_helpers import make_env

    env = make_env(env_id, "tools", recipe)
    inner = env.unwrapped

    @settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(turns=st.lists(st.sampled_from(NOTHING), min_size=1, max_size=4), index=st.sampled_from(QUESTIONS))
    def check(turns, index):
        said = iter(turns * inner.max_turns)
        total, info = play(env, index, lambda obs: next(said))
        assert info["num_invalid"] >= info["turn"] and info["num_searches"] == 0 and info["answer"] is None
        assert total == inner.recipe.floor(inner.episode())
        assert all(info["reward_components"].get(name, 0.0) == 0.0 for name in ANSWER_CREDIT), info["reward_components"]

    check()
