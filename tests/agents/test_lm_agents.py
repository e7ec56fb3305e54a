"""LM agents: the token record of every turn, the families' protocols, chat prompts."""

import pytest

from env_helpers import make_small
from searchgym.agents import play_episode
from searchgym.agents.lm_agents import EndToEndAgent, EvidenceAgent, LMAgent, SearcherAgent, policy_agent
from searchgym.error import ConfigError
from searchgym.lm.scripted import ScriptedLM
from searchgym.lm.testing import tiny_tokenizer


def scripted(responses):
    return ScriptedLM(responses, tiny_tokenizer())


def test_trajectory_is_prompt_then_generated_and_observation_ids():
    env = make_small("searchgym/SearchR1-v0")
    question = env.unwrapped.examples[0]
    gold = question.answers[0]
    lm = scripted(["<think> look </think><search> founder </search>", f"<answer> {gold} </answer>"])
    agent = EndToEndAgent.for_env(env, lm)
    obs, info = env.reset(options={"example_index": 0})
    (action,) = agent.act([obs], [info])
    assert action == "<think> look </think><search> founder </search>"
    obs2, _, _, _, info2 = env.step(action)
    (action2,) = agent.act([obs2], [info2])
    _, reward, terminated, _, _ = env.step(action2)
    assert terminated and reward == 1.0
    trajectory = agent.end_episode(0)
    tok = lm.tokenizer
    # The prompt went through the chat template of the tokenizer.
    assert trajectory.prompt_ids == tuple(tok.encode(tok.apply_chat_template(info["prompt_messages"], add_generation_prompt=True, tokenize=False), add_special_tokens=False))
    kinds = [s.generated for s in trajectory.segments]
    assert kinds == [True, False, True]
    assert trajectory.segments[0].token_ids == tuple(tok.encode(action, add_special_tokens=False))
    assert trajectory.segments[1].token_ids == tuple(tok.encode(obs2, add_special_tokens=False))
    assert trajectory.loss_mask == [1] * len(trajectory.segments[0]) + [0] * len(trajectory.segments[1]) + [1] * len(trajectory.segments[2])
    assert trajectory.response_logprobs[len(trajectory.segments[0])] is None
    assert trajectory.num_generated == len(trajectory.segments[0]) + len(trajectory.segments[2])
    assert agent.end_episode(0) is None  # forgotten


def test_second_turn_is_generated_from_the_recorded_ids():
    seen = []
    tok = tiny_tokenizer()

    def respond(prompt):
        seen.append(prompt)
        return "<search> river </search>" if len(seen) == 1 else "<answer> x </answer>"

    env = make_small("searchgym/SearchR1-v0")
    agent = EndToEndAgent.for_env(env, ScriptedLM(respond, tok))
    play_episode(env, agent, options={"example_index": 1})
    assert len(seen) == 2
    # The second prompt is the first prompt, the first turn and the observation, verbatim.
    assert seen[1].startswith(seen[0] + "<search> river </search>")
    assert "<information>" in seen[1][len(seen[0]):]


def test_families_refuse_other_protocols_and_policy_agent_picks_by_protocol():
    lm = scripted(["x"])
    with pytest.raises(ConfigError) as e:
        EndToEndAgent(lm, "s3")
    assert str(e.value) == (
        "EndToEndAgent plays the search_r1, r1_searcher, recon protocol(s), got 's3'. Use SearcherAgent for that env."
    )
    assert type(policy_agent(make_small("searchgym/S3-v0"), lm)) is SearcherAgent
    assert type(policy_agent(make_small("searchgym/RSearch-v0"), lm)) is EvidenceAgent
    assert type(policy_agent(make_small("searchgym/RECON-v0"), lm)) is EndToEndAgent
    with pytest.raises(ConfigError, match="expects lm to be a searchgym LanguageModel"):
        LMAgent("smollm2")
    with pytest.raises(ConfigError, match="max_new_tokens to be a positive integer, got 0"):
        LMAgent(lm, max_new_tokens=0)


def test_r1_searcher_prompt_is_raw_text_unless_chat_is_forced():
    env = make_small("searchgym/R1Searcher-v0")
    lm = scripted(["<answer> x </answer>"])
    obs, info = env.reset(options={"example_index": 0})
    agent = policy_agent(env, lm)
    agent.act([obs], [info])
    assert agent.trajectory(0).prompt_ids == tuple(lm.tokenizer.encode(obs, add_special_tokens=False))
    chat_agent = policy_agent(env, lm, chat=True)
    chat_agent.act([obs], [info])
    assert chat_agent.trajectory(0).prompt_ids != agent.trajectory(0).prompt_ids


def test_s3_searcher_and_r_search_evidence_agents_play_their_protocols():
    env = make_small("searchgym/S3-v0")
    ex = env.unwrapped.examples[0]
    lm = scripted(['<search_complete>False</search_complete>\n<query>{"query": "%s"}</query>' % ex.question, "<important_info>[1]</important_info>\n<search_complete>True</search_complete>"])
    total, info = play_episode(env, SearcherAgent.for_env(env, lm), options={"example_index": 0})
    assert info["num_searches"] == 1 and info["action_kinds"] == ("select", "complete")
    assert "gen_acc" in info["reward_components"]

    env = make_small("searchgym/RSearch-v0")
    index = next(i for i, e in enumerate(env.unwrapped.examples) if e.metadata["type"] == "single")
    ex = env.unwrapped.examples[index]
    gold, quote = ex.answers[0], ex.metadata["evidence"][0]  # the answer passage's sentence, quoted
    lm = scripted([f"<search> {ex.question} </search>", f"<original_evidence> {quote} </original_evidence>\n<answer> {gold} </answer>"])
    total, info = play_episode(env, EvidenceAgent.for_env(env, lm), options={"example_index": index})
    assert info["evidence"] == quote and info["answer"] == gold
    assert info["reward_components"]["evidence_f1"] == 1.0


def test_act_with_generations_returns_the_generations_aligned_with_the_texts():
    env = make_small("searchgym/SearchR1-v0")
    lm = scripted(["thinking about it for a long while now", "<answer> x </answer>"])
    agent = EndToEndAgent.for_env(env, lm, max_new_tokens=8)
    first = env.reset(options={"example_index": 0})
    second = env.reset(options={"example_index": 1})
    texts, generations = agent.act_with_generations([first[0], second[0]], [dict(first[1], slot=0), dict(second[1], slot=1)])
    assert texts == [g.text for g in generations] == [lm.tokenizer.decode(g.token_ids) for g in generations]
    assert [g.finish_reason for g in generations] == ["length", "stop"]
    assert [len(g.token_ids) for g in generations] == [8, 5] and texts[1] == "<answer> x </answer>"
    # Each generation is what the episode's trajectory recorded.
    for slot, g in enumerate(generations):
        segment = agent.trajectory(slot).segments[-1]
        assert segment.generated and segment.token_ids == g.token_ids
    # act returns the texts of the same work (the script cycles back to its first response).
    assert agent.act([first[0]], [dict(first[1], slot=2)]) == [texts[0]]


def test_two_threads_calling_one_agent_at_once_each_get_their_own_generations():
    import threading

    from searchgym.lm.base import LanguageModel

    def respond(prompt):
        return f"<answer> {len(prompt)} </answer>"

    env = make_small("searchgym/SearchR1-v0")
    resets = [env.reset(options={"example_index": i}) for i in range(4)]
    batches = {"a": ([0], [10]), "b": ([1, 2, 3], [20, 21, 22])}  # thread -> (examples, slots)

    def batch(name):
        examples, slots = batches[name]
        return [resets[i][0] for i in examples], [dict(resets[i][1], slot=s) for i, s in zip(examples, slots)]

    alone = {name: EndToEndAgent.for_env(env, ScriptedLM(respond, tiny_tokenizer())).act_with_generations(*batch(name)) for name in batches}
    assert len(alone["a"][1]) == 1 and len(alone["b"][1]) == 3 and alone["a"][0][0] != alone["b"][0][0]

    both_inside = threading.Barrier(2, timeout=30)

    class TogetherLM(ScriptedLM):
        """Returns a batch's generations only once the other thread's call is under way too."""

        def _generate(self, prompt_ids, params):
            both_inside.wait()
            return super()._generate(prompt_ids, params)

    agent = EndToEndAgent.for_env(env, TogetherLM(respond, tiny_tokenizer()))
    assert isinstance(agent.lm, LanguageModel)
    got, errors = {}, []

    def play(name):
        try:
            got[name] = agent.act_with_generations(*batch(name))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=play, args=(name,)) for name in batches]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == [] and got == alone
    assert [agent.trajectory(s).segments[-1].token_ids for s in (10, 20, 21, 22)] == [g.token_ids for g in got["a"][1] + got["b"][1]]


def test_a_subclass_overriding_act_alone_is_a_config_error():
    with pytest.raises(ConfigError, match=r"^Shouting overrides act but inherits act_with_generations from LMAgent, which the drivers call instead of act; override act_with_generations"):

        class Shouting(EndToEndAgent):
            def act(self, observations, infos):
                return [t.upper() for t in super().act(observations, infos)]

    class Shouting(EndToEndAgent):  # the way: override act_with_generations
        def act_with_generations(self, observations, infos):
            texts, generations = super().act_with_generations(observations, infos)
            return [t.upper() for t in texts], generations

    env = make_small("searchgym/SearchR1-v0")
    observation, info = env.reset(options={"example_index": 0})
    assert Shouting.for_env(env, scripted(["<answer> x </answer>"])).act([observation], [info]) == ["<ANSWER> X </ANSWER>"]


def test_observations_are_cut_to_max_observation_tokens_as_the_papers_rollouts_cut_them():
    tok = tiny_tokenizer()
    env = make_small("searchgym/SearchR1-v0")
    lm = scripted(["<search> founder </search>", "<answer> x </answer>"])
    agent = EndToEndAgent.for_env(env, lm, max_observation_tokens=5)
    obs, info = env.reset(options={"example_index": 0})
    obs2, *_, info2 = env.step(agent.act([obs], [info])[0])
    agent.act([obs2], [info2])
    trajectory = agent.end_episode(0)
    assert len(tok.encode(obs2, add_special_tokens=False)) > 5
    assert trajectory.segments[1].token_ids == tuple(tok.encode(obs2, add_special_tokens=False))[:5]
    assert not trajectory.segments[1].generated


def test_a_context_past_max_context_tokens_ends_the_episode_as_prompt_too_long():
    from searchgym.agents import Task, run_episodes

    env = make_small("searchgym/SearchR1-v0")
    calls = []

    def respond(prompt):
        calls.append(prompt)
        return "<search> founder </search>"

    tok = tiny_tokenizer()
    prompt_len = len(tok.encode(tok.apply_chat_template(env.reset(options={"example_index": 0})[1]["prompt_messages"], add_generation_prompt=True, tokenize=False), add_special_tokens=False))
    agent = EndToEndAgent.for_env(env, ScriptedLM(respond, tok), max_context_tokens=prompt_len + 10)
    (result,) = run_episodes([env], agent, [Task(env.unwrapped.examples[0].id)], keep_trajectories=True)
    # the first turn fits; after its search the context is longer than the cap: no second call
    assert len(calls) == 1 and result.outcome == "prompt_too_long" and result.num_searches == 1
    with pytest.raises(ConfigError, match="^EndToEndAgent expects max_context_tokens to be a positive integer, got 0.$"):
        EndToEndAgent.for_env(env, scripted(["x"]), max_context_tokens=0)
