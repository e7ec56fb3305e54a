"""Same decisions, same reward: well-formed, malformed, prose, parallel, cut and mixed turns
(tests/tool_parity.py) through the tag grammar, the tools env, and TRL's environment path
(its own response parser, ``parse_response`` over a hermes template, then the calls it reads
run as TRL's loop runs them, ``unread_calls`` and ``get_reward``). The verl leg, the same
scenarios through verl's ToolAgentLoop and hermes reader, is in test_verl.py (it needs
.venv-verl: ``make test-verl``).

A malformed or cut call is the env's bad call under every engine (R1-Searcher's -2.0 format
penalty included); the one difference is TRL's documented rule for a reply without any call
(the episode ends without an answer), so TRL's reward is the reference of the turns its loop
plays (``Scenario.trl_turns``).
"""

import pytest

from tool_parity import GAMES, MALFORMED, SPLIT, WORLD, Scenario, example, scenarios, tags_reward, tools_reward

CASES = [(env_id, s) for env_id in GAMES for s in scenarios(env_id)]
IDS = [f"{env_id.removeprefix('searchgym/')}-{s.name}" for env_id, s in CASES]


@pytest.mark.parametrize(("env_id", "scenario"), CASES, ids=IDS)
def test_the_tools_env_scores_the_texts_as_the_tag_game_scores_the_decisions(env_id: str, scenario: Scenario):
    assert tools_reward(env_id, scenario.tools, scenario.index) == pytest.approx(tags_reward(env_id, scenario.tags, scenario.index))


def test_the_scenarios_tell_apart_what_they_check():
    """A bad call costs its penalty (and R1-Searcher its -2.0 format reward for an episode
    without a well-formed answer): reading the leftover text as the final answer (verl's
    old reading) or never showing the env the call (TRL's loop alone) would score otherwise."""
    for env_id in GAMES:
        named = {s.name: s for s in scenarios(env_id)}
        bad = named["malformed"]
        malformed, searched = tags_reward(env_id, bad.tags, bad.index), tags_reward(env_id, bad.tags[:1], bad.index)
        assert malformed == pytest.approx(searched - 0.25), env_id
        assert tags_reward(env_id, named["well-formed"].tags, named["well-formed"].index) >= 1.0, env_id
    cut = named_of("searchgym/R1Searcher-v0")["cut"]
    assert tags_reward("searchgym/R1Searcher-v0", cut.tags, cut.index) == -2.25


def named_of(env_id: str) -> dict[str, Scenario]:
    return {s.name: s for s in scenarios(env_id)}


# --------------------------------------------------------------------------- TRL's environment path
@pytest.fixture(scope="module")
def trl_parts():
    pytest.importorskip("trl", reason="TRL is in .venv (make install)")
    from trl.chat_template_utils import parse_response

    from integrations.test_trl_tools import hermes_tokenizer

    tokenizer = hermes_tokenizer()
    prefix = tokenizer.apply_chat_template([{"role": "user", "content": "q"}], add_generation_prompt=True, tokenize=False)
    return tokenizer, parse_response, tokenizer(prefix, add_special_tokens=False)["input_ids"]


_FACTORIES: dict = {}


def trl_reward(env_id: str, texts: tuple[str, ...], index: int, parts) -> tuple[float, list[dict]]:
    """``texts`` as TRL 1.16's tool loop plays them: each reply parsed by TRL's
    ``parse_response``; while it has calls, each runs as the environment's method; a reply
    without a call (or the texts running out: the completion budget) ends the loop; then the
    reward functions: ``unread_calls``, then ``get_reward``."""
    from searchgym.integrations.trl import tool_environment, unread_calls

    tokenizer, parse_response, prefix = parts
    if env_id not in _FACTORIES:
        _FACTORIES[env_id] = tool_environment(env_id, split=SPLIT, **WORLD)
    environment = _FACTORIES[env_id]()
    environment.reset(example_id=example(env_id, index).id, split=SPLIT, prompt=[{"role": "user", "content": ""}])
    completion: list[dict] = []
    for text in texts:
        message = parse_response(tokenizer, tokenizer(text + "<|im_end|>", add_special_tokens=False)["input_ids"], prefix=prefix)
        completion.append(message)
        if not message.get("tool_calls"):
            break
        for call in message["tool_calls"]:
            function = call["function"]
            completion.append({"role": "tool", "name": function["name"], "content": getattr(environment, function["name"])(**function["arguments"])})
    assert unread_calls([completion], environments=[environment]) == [0.0]
    return environment.get_reward(), completion


@pytest.mark.parametrize(("env_id", "scenario"), CASES, ids=IDS)
def test_trls_environment_path_scores_the_texts_as_the_tag_game_scores_the_decisions(env_id: str, scenario: Scenario, trl_parts):
    reward, completion = trl_reward(env_id, scenario.tools, scenario.index, trl_parts)
    assert reward == pytest.approx(tags_reward(env_id, scenario.tags[: scenario.trl_turns], scenario.index))
    if scenario.name in ("malformed", "cut", "mixed"):  # TRL's parser read no call in the last reply: the env did
        assert not completion[-1].get("tool_calls") and "<tool_call>" in completion[-1]["content"]


def test_without_unread_calls_trl_would_let_a_malformed_call_escape_its_penalty(trl_parts):
    """What unread_calls closes: TRL's loop alone never shows the env the unreadable call."""
    from searchgym.integrations.trl import tool_environment

    tokenizer, parse_response, prefix = trl_parts
    environment = tool_environment("searchgym/R1Searcher-v0", split=SPLIT, **WORLD)()
    environment.reset(example_id=example("searchgym/R1Searcher-v0").id, split=SPLIT)
    message = parse_response(tokenizer, tokenizer(MALFORMED + "<|im_end|>", add_special_tokens=False)["input_ids"], prefix=prefix)
    assert not message.get("tool_calls")
    named = named_of("searchgym/R1Searcher-v0")
    # Cut with no answer and no bad call: the penalty escaped.
    assert environment.get_reward() == pytest.approx(tags_reward("searchgym/R1Searcher-v0", (), 0)) == -2.0


def test_unread_calls_explains_what_it_needs_and_refuses_to_read_after_the_reward(trl_parts):
    from searchgym.error import ConfigError, SearchGymError
    from searchgym.integrations.trl import tool_environment, unread_calls

    with pytest.raises(ConfigError, match=r"^unread_calls reads the environments of GRPOTrainer's tool loop; .*got no environments\.$"):
        unread_calls([[{"role": "assistant", "content": "x"}]])
    with pytest.raises(ConfigError, match=r"^unread_calls expects one environment per completion, got 0 for 1\.$"):
        unread_calls([[{"role": "assistant", "content": "x"}]], environments=[])
    environment = tool_environment("searchgym/R1Searcher-v0", split=SPLIT, **WORLD)()
    environment.reset(example_id=example("searchgym/R1Searcher-v0").id, split=SPLIT)
    environment.get_reward()
    with pytest.raises(SearchGymError, match=r"^unread_calls read a rollout after .*get_reward\(\) scored it; list unread_calls in"):
        unread_calls([[{"role": "assistant", "content": MALFORMED}]], environments=[environment])
    # Prose and a reply TRL read are left alone (TRL's rule; its calls already ran).
    environment.reset(example_id=example("searchgym/R1Searcher-v0").id, split=SPLIT)
    assert unread_calls([[{"role": "assistant", "content": "Paris"}], "plain text"], environments=[environment, None]) == [0.0, 0.0]
    assert environment.episode.rewards == [] and environment.get_reward() == -2.0  # no answer: R1-Searcher's format reward
