"""Baselines: no retrieval, naive RAG (BM25 and any retriever), random; the agent registry."""

import pytest

from env_helpers import make_small
from searchgym.agents import AGENTS, Task, make_agent, play_episode, run_episodes
from searchgym.agents.baselines import GoldPassageAgent, NaiveRAGAgent, NoRetrievalAgent, RandomAgent, clean_answer
from searchgym.error import ConfigError, UnknownNameError
from searchgym.lm.scripted import ScriptedLM
from searchgym.lm.testing import tiny_tokenizer


def recorder(reply):
    prompts = []
    return ScriptedLM(lambda p: (prompts.append(p), reply(p) if callable(reply) else reply)[1], tiny_tokenizer()), prompts


def test_clean_answer():
    assert clean_answer("\n  Answer: Paris.\nmore") == "Paris."
    assert clean_answer("   ") == ""


def test_no_retrieval_answers_in_one_turn_from_the_zero_shot_prompt():
    env = make_small("searchgym/SearchR1-v0")
    gold = env.unwrapped.examples[0].answers[0]
    lm, prompts = recorder(gold)
    total, info = play_episode(env, NoRetrievalAgent.for_env(env, lm), options={"example_index": 0})
    assert total == 1.0 and info["turn"] == 1 and info["num_searches"] == 0
    assert "You MUST directly answer" in prompts[0] and "Contexts:" not in prompts[0]


def test_naive_rag_reads_the_top_k_documents_for_the_question():
    env = make_small("searchgym/SearchR1-v0", top_k=2)
    ex = env.unwrapped.examples[0]
    lm, prompts = recorder("x")
    agent = NaiveRAGAgent.for_env(env, lm)
    play_episode(env, agent, options={"example_index": 0})
    top = env.unwrapped.retriever.search([ex.question], 2)[0]
    assert agent.k == 2
    assert f"Doc 1 (Title: {top[0].passage.title})\n{top[0].passage.text}" in prompts[0]
    assert f"Doc 2 (Title: {top[1].passage.title})" in prompts[0] and "Doc 3 (" not in prompts[0]
    assert ex.question in prompts[0] and prompts[0].index("Doc 2 (") < prompts[0].rindex(ex.question)


@pytest.mark.parametrize("agent_name", ["no-retrieval", "naive-rag"])
def test_an_empty_one_shot_answer_is_a_flagged_episode_not_a_crash(agent_name):
    envs = [make_small("searchgym/SearchR1-v0", max_turns=3) for _ in range(3)]
    examples = envs[0].unwrapped.examples[:4]
    silent = examples[1].question
    lm, prompts = recorder(lambda p: "Answer:" if silent in p else "x")
    agent = make_agent(agent_name, envs[0], lm=lm)
    results = run_episodes(envs, agent, [Task(ex.id, 0) for ex in examples])
    assert [r.example_id for r in results] == [ex.id for ex in examples]
    empty = results[1]
    assert empty.outcome == "truncated" and empty.num_turns == 3 and empty.num_invalid == 3 and empty.prediction is None
    assert "invalid_turn" in empty.flags
    assert sum(silent in p for p in prompts) == 3  # a fresh try on every turn, from the same prompt
    assert all(r.outcome == "answered" and r.num_turns == 1 for i, r in enumerate(results) if i != 1)
    assert agent._questions == {}  # forgotten as the episodes ended


def test_one_shot_baselines_refuse_s3_where_the_generator_answers():
    lm, _ = recorder("x")
    with pytest.raises(ConfigError, match="in the 's3' protocol the env's generator answers"):
        NoRetrievalAgent.for_env(make_small("searchgym/S3-v0"), lm)


@pytest.mark.parametrize("env_id", ["searchgym/SearchR1-v0", "searchgym/R1Searcher-v0", "searchgym/S3-v0", "searchgym/RSearch-v0"])
def test_random_agent_is_seeded_and_well_formed(env_id):
    def run(seed, num_envs=2, start=0):
        envs = [make_small(env_id) for _ in range(num_envs)]
        tasks = [Task(ex.id, 0) for ex in envs[0].unwrapped.examples[start:6]]
        return run_episodes(envs, RandomAgent.for_env(envs[0], seed=seed), tasks)

    first, again, other = run(1), run(1), run(2)
    key = lambda rs: [(r.prediction, r.num_turns, r.num_searches, r.reward) for r in rs]  # noqa: E731
    assert key(first) == key(again) and key(first) != key(other)
    # Each episode draws from its own stream: the same play alone, beside others, or resumed midway.
    assert key(run(1, num_envs=1)) == key(run(1, num_envs=4)) == key(first)
    assert key(run(1, start=4)) == key(first)[4:]
    assert all(r.num_invalid == 0 for r in first)
    assert sum(r.num_searches for r in first) > 0


def test_the_gold_passage_agent_reads_the_questions_own_passages_whatever_retrieval_finds():
    env = make_small("searchgym/SearchR1-v0")
    example = env.unwrapped.examples[0]
    lm, prompts = recorder(example.answers[0])
    agent = make_agent("gold-passage", env, lm=lm)
    assert isinstance(agent, GoldPassageAgent)
    total, info = play_episode(env, agent, options={"example_index": 0})
    assert total == 1.0 and info["turn"] == 1 and info["num_searches"] == 0
    corpus = env.unwrapped.corpus
    for pid in example.metadata["supporting_ids"]:
        assert corpus.get(pid).text in prompts[0]
    # wiki-vital names one source article per question.
    import gymnasium as gym

    wiki = gym.make("searchgym/SearchR1-v0", corpus="wiki-vital", dataset="wiki-vital-answerable")
    question = wiki.unwrapped.examples[0]
    agent = GoldPassageAgent.for_env(wiki, lm)
    assert agent.docs(question.question)[0].endswith(wiki.unwrapped.corpus.get(question.metadata["source_passage_id"]).text)
    # Questions that name no gold passage are refused with what it needs.
    env.unwrapped.examples[0] = type(example)(example.id, example.question, example.answers, {})
    with pytest.raises(ConfigError, match=r"GoldPassageAgent expects questions whose metadata names their gold passages"):
        GoldPassageAgent.for_env(env, lm)


def test_make_agent_names_and_errors():
    env = make_small("searchgym/SearchR1-v0")
    lm, _ = recorder("x")
    assert set(AGENTS) == {"lm", "no-retrieval", "naive-rag", "naive-rag-dense", "gold-passage", "oracle", "random", "sb3", "chat-tools"}
    assert make_agent("naive-rag", env, lm=lm, k=5).k == 5
    assert make_agent("random", env).name == "random"
    assert make_agent("lm", env, lm=lm).name == "end-to-end"
    with pytest.raises(UnknownNameError, match="Unknown agent 'naive_rag'. Did you mean 'naive-rag'?"):
        make_agent("naive_rag", env, lm=lm)
    with pytest.raises(ConfigError, match="The 'lm' agent needs a language model, got lm=None"):
        make_agent("lm", env)


@pytest.mark.parametrize("agent_name", ["lm", "no-retrieval", "naive-rag", "random", "oracle"])
def test_act_refuses_observations_and_infos_that_do_not_pair_up(agent_name):
    env = make_small("searchgym/SearchR1-v0")
    lm, _ = recorder("x")
    agent = make_agent(agent_name, env, lm=lm)
    _, info = env.reset(seed=0)
    with pytest.raises(ConfigError, match=r"\.act expects one info per observation, got 1 infos for 2 observations\.$"):
        agent.act(["a", "b"], [info])
