"""The vectorized driver: same results as one at a time, batched LM calls, failures as outcomes."""

import re

import pytest
from env_helpers import make_small
from lm_helpers import recording_lm

from searchgym.agents import EpisodeResult, Task, run_episodes
from searchgym.agents.base import Agent
from searchgym.agents.lm_agents import policy_agent
from searchgym.agents.oracle import SynthWikiOracle
from searchgym.envs import BatchCounts, ModelUser
from searchgym.error import BackendError, ConfigError
from searchgym.lm.base import Generation
from searchgym.lm.scripted import ScriptedLM
from searchgym.lm.testing import tiny_causal_lm, tiny_tokenizer


def tasks_for(env, n, seed=0):
    return [Task(ex.id, seed) for ex in env.unwrapped.examples[:n]]


@pytest.fixture(scope="module")
def tiny_lm():
    from searchgym.lm.hf import TransformersLM

    model = tiny_causal_lm()
    model.config.max_position_embeddings = 4096  # rotary positions: a longer context is only a limit we set
    return TransformersLM(model, tiny_tokenizer())


def comparable(r: EpisodeResult):
    d = r.to_dict()
    d.pop("wall_time")
    return d


@pytest.mark.parametrize("env_id", ["searchgym/SearchR1-v0", "searchgym/RSearch-v0", "searchgym/S3-v0"])
def test_vectorized_equals_sequential_at_temperature_zero(tiny_lm, env_id):
    envs = [make_small(env_id, max_turns=3) for _ in range(4)]
    agent = policy_agent(envs[0], tiny_lm, max_new_tokens=24)
    tasks = tasks_for(envs[0], 6)
    together = run_episodes(envs, agent, tasks, keep_trajectories=True)
    alone = run_episodes(envs[:1], agent, tasks, keep_trajectories=True)
    assert [comparable(r) for r in together] == [comparable(r) for r in alone]
    assert [r.trajectory.context_ids() for r in together] == [r.trajectory.context_ids() for r in alone]
    assert all(r.generated_tokens == r.trajectory.num_generated > 0 for r in together)
    assert all(r.context_tokens == len(r.trajectory) for r in together)


class FirstDocGenerator(ModelUser):
    """A frozen generator that answers with the first words of its first document; its
    model calls go through ModelUser.generate, so envs stepped together batch them."""

    def __init__(self, lm):
        self.lm = lm

    def __call__(self, question, docs):
        return self.generate([question + "\n" + "\n".join(docs)], max_new_tokens=8)[0].text


def test_frozen_model_calls_of_parallel_steps_are_batched_and_results_unchanged():
    def respond(prompt):
        lines = prompt.split("\n")
        return lines[2] if len(lines) > 2 else "nothing"

    results = []
    for num_envs in (4, 1):
        lm = recording_lm(respond)
        envs = [make_small("searchgym/S3-v0", generator=FirstDocGenerator(lm)) for _ in range(num_envs)]
        agent = SynthWikiOracle.for_env(envs[0])
        counts = BatchCounts()
        results.append((run_episodes(envs, agent, tasks_for(envs[0], 8), batch_counts=counts), lm.batches, counts))
    (together, batches4, counts4), (alone, batches1, counts1) = results
    assert [comparable(r) for r in together] == [comparable(r) for r in alone]
    assert sum(batches4) == sum(batches1) == 16  # a generator call and a naive-RAG call per question
    assert max(batches1) == 1 and max(batches4) > 1 and len(batches4) < len(batches1)
    assert counts4.requests == counts1.requests == 16
    assert counts4.calls == len(batches4) < counts1.calls == len(batches1) == 16


def test_recon_envs_searching_in_the_same_round_make_one_summarizer_call():
    from searchgym.envs.components.lm_summarizer import LLMSummarizer

    lm = recording_lm(lambda prompt: "Summary: " + prompt.split("Search Query (used by the retriever): ")[1].split("\n")[0])
    envs = [make_small("searchgym/RECON-v0", summarizer=LLMSummarizer(lm)) for _ in range(16)]
    counts = BatchCounts()
    out = run_episodes(envs, SynthWikiOracle.for_env(envs[0]), tasks_for(envs[0], 16), batch_counts=counts)
    searches = sum(r.num_searches for r in out)
    assert all(r.num_searches >= 1 for r in out) and sum(lm.batches) == searches
    # Every round in which envs search makes one search call and one summarizer call for all of them.
    assert counts.calls == counts.searches == len(lm.batches) < counts.requests == counts.search_requests == searches
    assert counts.rounds == counts.calls + counts.searches
    assert lm.batches[0] == 16
    alone = run_episodes(envs[:1], SynthWikiOracle.for_env(envs[0]), tasks_for(envs[0], 16))
    assert [comparable(r) for r in out] == [comparable(r) for r in alone]


class FailingAgent(Agent):
    """Raises a backend error on its second call."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    def act(self, observations, infos):
        self.calls += 1
        if self.calls == 2:
            raise BackendError("server at http://127.0.0.1:9 timed out after 3 attempts")
        return self.inner.act(observations, infos)


def test_a_failing_backend_is_an_outcome_of_the_live_episodes_only():
    envs = [make_small("searchgym/SearchR1-v0") for _ in range(2)]
    agent = FailingAgent(SynthWikiOracle.for_env(envs[0]))
    out = run_episodes(envs, agent, tasks_for(envs[0], 5))
    assert [r.outcome for r in out[:2]] == ["backend_error", "backend_error"]
    assert out[0].error == "server at http://127.0.0.1:9 timed out after 3 attempts"
    assert out[0].prediction is None and out[0].em == 0.0
    assert {r.outcome for r in out[2:]} == {"answered"} and all(r.em == 1.0 for r in out[2:])


def exploding_generator(question, docs):
    """A frozen generator that fails on the questions about founders."""
    if "founder" in question:
        raise RuntimeError("generator exploded")
    return "x"


def test_an_error_inside_one_step_is_recorded_and_the_others_finish():
    envs = [make_small("searchgym/S3-v0", generator=exploding_generator) for _ in range(3)]
    tasks = tasks_for(envs[0], 12)
    out = run_episodes(envs, SynthWikiOracle.for_env(envs[0]), tasks)
    failed = [r for r in out if "founder" in r.question]
    # The recipe's failure names it and quotes the frozen model's exception (a RecipeError).
    assert failed and all(r.outcome == "error" and r.error.startswith("RecipeError: Reward recipe 's3_gbr' (searchgym.rewards.recipes:S3GainBeyondRAG) raised in score() on example ") and "RuntimeError: generator exploded (at " in r.error for r in failed)
    assert all(r.outcome == "completed" for r in out if "founder" not in r.question)


def test_prompt_too_long_length_and_empty_generations_are_flagged():
    from searchgym.lm.hf import TransformersLM

    short = TransformersLM(tiny_causal_lm(), tiny_tokenizer())  # 256-token context: the prompt does not fit
    envs = [make_small("searchgym/SearchR1-v0")]
    out = run_episodes(envs, policy_agent(envs[0], short), tasks_for(envs[0], 2))
    assert [r.outcome for r in out] == ["prompt_too_long"] * 2
    assert all(r.error == "the agent's context no longer fits its model's context window; nothing was generated for this turn" for r in out)
    assert out[0].generated_tokens == 0 and out[0].context_tokens > 256

    lm = ScriptedLM(["", "<think> " + "word " * 50], tiny_tokenizer())
    envs = [make_small("searchgym/SearchR1-v0", max_turns=2)]
    (r,) = run_episodes(envs, policy_agent(envs[0], lm, max_new_tokens=10), tasks_for(envs[0], 1))
    assert r.outcome == "truncated" and r.flags == ["empty_generation", "invalid_turn", "length"]


def test_results_come_in_task_order_and_on_result_sees_each_once():
    envs = [make_small("searchgym/SearchR1-v0") for _ in range(3)]
    tasks = tasks_for(envs[0], 7)
    seen = []
    out = run_episodes(envs, SynthWikiOracle.for_env(envs[0]), tasks, on_result=seen.append, progress=True, desc="oracle")
    assert [r.example_id for r in out] == [t.example_id for t in tasks]
    assert sorted(r.example_id for r in seen) == sorted(t.example_id for t in tasks)
    assert EpisodeResult.from_dict(out[0].to_dict()) == out[0]
    with pytest.raises(ConfigError, match="at least one env"):
        run_episodes([], SynthWikiOracle.for_env(envs[0]), tasks)


def test_continuous_scheduling_was_removed_and_says_what_to_use():
    envs = [make_small("searchgym/SearchR1-v0")]
    agent, tasks = SynthWikiOracle.for_env(envs[0]), tasks_for(envs[0], 1)
    with pytest.raises(
        ConfigError,
        match=re.escape(
            "run_episodes(scheduling='continuous') was removed: continuous scheduling measured slower than turn by turn "
            "(greedy rollout 37.2 s vs 27.8 s). Leave scheduling (--scheduling) out: episodes are played turn by turn."
        ),
    ):
        run_episodes(envs, agent, tasks, scheduling="continuous")
    with pytest.raises(ConfigError, match=r"^run_episodes expects scheduling='turns' \(the only scheduling\), got 'async'\.$"):
        run_episodes(envs, agent, tasks, scheduling="async")
    assert [r.outcome for r in run_episodes(envs, agent, tasks, scheduling="turns")] == ["answered"]


@pytest.mark.parametrize("env_id", ["searchgym/SearchR1-v0", "searchgym/RSearch-v0"])
def test_sampled_episodes_do_not_depend_on_batching(tiny_lm, env_id):
    """With an agent seed, each turn samples from a stream of its own episode (question,
    task seed, turn): 4 envs and 1 env give the same episodes; another task seed draws
    another episode."""
    envs = [make_small(env_id, max_turns=3) for _ in range(4)]
    agent = policy_agent(envs[0], tiny_lm, max_new_tokens=16, temperature=1.0, seed=5)
    tasks = tasks_for(envs[0], 5) + [Task(envs[0].unwrapped.examples[0].id, 1)]
    together = run_episodes(envs, agent, tasks, keep_trajectories=True)
    alone = run_episodes(envs[:1], agent, tasks, keep_trajectories=True)
    expected = [r.trajectory.context_ids() for r in alone]
    assert [r.trajectory.context_ids() for r in together] == expected
    assert [comparable(r) for r in together] == [comparable(r) for r in alone]
    # The same question under task seeds 0 and 1: two different draws.
    assert expected[0] != expected[-1]
    # Another agent seed draws other episodes.
    other = run_episodes(envs, policy_agent(envs[0], tiny_lm, max_new_tokens=16, temperature=1.0, seed=6), tasks[:1], keep_trajectories=True)
    assert other[0].trajectory.context_ids() != expected[0]


class _Miscounting(Agent):
    def __init__(self, extra):
        self.extra = extra

    def act(self, observations, infos):
        return ["<search> x </search>"] * (len(observations) + self.extra)


@pytest.mark.parametrize("extra", [-1, 1])
def test_an_agent_returning_the_wrong_number_of_turns_is_a_config_error(extra):
    envs = [make_small("searchgym/SearchR1-v0") for _ in range(2)]
    tasks = [Task(ex.id, 0) for ex in envs[0].unwrapped.examples[:3]]
    with pytest.raises(ConfigError, match=r"^_Miscounting\.act returned \d+ actions for \d+ observations; it must return a list of one turn per observation, in order\.$"):
        run_episodes(envs, _Miscounting(extra), tasks)


class _Counted(Agent):
    """The oracle's turns, each reported as a generation of ``tokens`` ids (or ``generations``
    as given, to test the driver's checks)."""

    def __init__(self, inner, tokens=3, generations=None):
        self.inner, self.tokens, self.generations = inner, tokens, generations

    def act(self, observations, infos):
        return self.act_with_generations(observations, infos)[0]

    def act_with_generations(self, observations, infos):
        texts = self.inner.act(observations, infos)
        if self.generations is not None:
            return texts, self.generations(texts)
        return texts, [Generation(t, tuple(range(self.tokens)), (0.0,) * self.tokens, "length") for t in texts]


def test_the_default_act_with_generations_is_act_and_no_generations():
    env = make_small("searchgym/SearchR1-v0")
    oracle = SynthWikiOracle.for_env(env)
    observation, info = env.reset(options={"example_index": 0})
    texts, generations = oracle.act_with_generations([observation], [dict(info, slot=5)])
    oracle.end_episode(5)
    assert texts == oracle.act([observation], [dict(info, slot=5)]) and texts[0].endswith("</search>")
    assert generations == [None]
    out = run_episodes([env], oracle, tasks_for(env, 2))
    assert [r.generated_tokens for r in out] == [0, 0] and all(r.flags == [] for r in out)


def test_the_driver_counts_the_tokens_of_the_returned_generations():
    envs = [make_small("searchgym/SearchR1-v0") for _ in range(2)]
    out = run_episodes(envs, _Counted(SynthWikiOracle.for_env(envs[0]), tokens=3), tasks_for(envs[0], 3))
    assert all(r.outcome == "answered" and r.num_turns >= 2 for r in out)
    assert [r.generated_tokens for r in out] == [3 * r.num_turns for r in out]
    assert all(r.flags == ["length"] for r in out)


@pytest.mark.parametrize(
    ("generations", "got"),
    [
        (lambda texts: [None] * (len(texts) + 1), r"\d+ generations for \d+ observations"),
        (lambda texts: [], r"0 generations for \d+ observations"),
        (lambda texts: None, r"a NoneType for \d+ observations"),
        (lambda texts: ["x"] * len(texts), r"a str among them for \d+ observations"),
    ],
)
def test_generations_not_aligned_with_the_batch_are_a_config_error(generations, got):
    envs = [make_small("searchgym/SearchR1-v0") for _ in range(2)]
    agent = _Counted(SynthWikiOracle.for_env(envs[0]), generations=generations)
    with pytest.raises(ConfigError, match=r"^_Counted\.act_with_generations returned " + got + r"; it must return, aligned with its texts, one searchgym\.lm\.base\.Generation per turn"):
        run_episodes(envs, agent, tasks_for(envs[0], 3))


def test_act_with_generations_returning_no_pair_is_a_config_error():
    class Texts(Agent):
        def act(self, observations, infos):
            return ["<search> x </search>"] * len(observations)

        def act_with_generations(self, observations, infos):
            return self.act(observations, infos)

    env = make_small("searchgym/SearchR1-v0")
    with pytest.raises(ConfigError, match=r"^Texts\.act_with_generations returned list \['<search> x </search>'\]; it must return a pair \(texts, generations\)"):
        run_episodes([env], Texts(), tasks_for(env, 1))


def test_team_episodes_share_the_loop_failures_outcomes_and_checks():
    """run_team_episodes runs the same loop: an error in one episode's step, a failing
    backend and a prompt that no longer fits are that episode's outcome; a policy
    returning the wrong number of turns is a config error."""
    pytest.importorskip("pettingzoo")
    from searchgym.agents.team import run_team_episodes
    from searchgym.envs import multi_agent
    from searchgym.envs.protocols import Complete
    from searchgym.envs.protocols.s3 import S3Protocol

    envs = [multi_agent.env(("searcher",), corpus_options={"seed": 7, "num_passages": 400}, generator=exploding_generator) for _ in range(3)]
    examples = envs[0].game.examples[:9]
    tasks = [Task(ex.id, 0) for ex in examples]
    complete = S3Protocol().write([Complete()])
    seen = []
    out = run_team_episodes(envs, {"searcher": lambda o, i: complete}, tasks, on_result=seen.append, progress=True)
    assert [r.example_id for r in out] == [t.example_id for t in tasks] and len(seen) == 9
    for r in out:
        if "founder" in r.question:
            assert r.outcome == "error" and r.error.startswith("RuntimeError: generator exploded (at ") and r.prediction is None
        else:
            assert r.outcome == "finished" and r.prediction == "x" and r.turns == {"searcher": 1}
    assert any("founder" in r.question for r in out) and all(r.wall_time > 0 for r in out)

    class Searcher(Agent):
        """Fails its second call; the first episode's prompt no longer fits the model."""

        def __init__(self):
            self.calls = 0

        def act(self, observations, infos):
            return self.act_with_generations(observations, infos)[0]

        def act_with_generations(self, observations, infos):
            self.calls += 1
            if self.calls == 2:
                raise BackendError("server timed out")
            generations = [Generation("", (), (), "prompt_too_long")] + [Generation(complete, (1, 2), (0.0, 0.0), "stop")] * (len(observations) - 1)
            return [complete] * len(observations), generations

    envs = [multi_agent.env(("searcher",), corpus_options={"seed": 7, "num_passages": 400}) for _ in range(2)]
    out = run_team_episodes(envs, {"searcher": Searcher()}, tasks[:4])
    assert [r.outcome for r in out] == ["prompt_too_long", "finished", "backend_error", "backend_error"]
    assert out[0].error == "the searcher's context no longer fits its model's context window; nothing was generated for this turn"
    assert out[1].generated_tokens == {"searcher": 2} and out[2].error == "server timed out"
    with pytest.raises(ConfigError, match=r"^_Miscounting\.act returned 3 actions for 2 observations; "):
        run_team_episodes(envs, {"searcher": _Miscounting(1)}, tasks[:2])

    class Plain:
        """A policy that is not an Agent: only act."""

        def act(self, observations, infos):
            return [complete] * (len(observations) + (infos[0]["example_id"] == tasks[2].example_id))

    out = run_team_episodes(envs, {"searcher": Plain()}, tasks[:2])
    assert [r.outcome for r in out] == ["finished", "finished"] and all(r.generated_tokens == {"searcher": 0} for r in out)
    with pytest.raises(ConfigError, match=r"^Plain\.act returned 2 actions for 1 observations; "):
        run_team_episodes(envs[:1], {"searcher": Plain()}, tasks[2:3])


def test_team_episodes_batch_the_frozen_generator_and_summarizer_component():
    """The model calls of team envs' components (frozen generator, LLM summarizer) are
    batched across envs as in single-agent episodes, and results do not depend on it."""
    pytest.importorskip("pettingzoo")
    from searchgym.agents.team import run_team_episodes
    from searchgym.envs import multi_agent
    from searchgym.envs.components.lm_summarizer import LLMSummarizer
    from searchgym.envs.protocols import Search
    from searchgym.envs.protocols.s3 import S3Protocol

    def respond(prompt):
        lines = prompt.split("\n")
        return lines[2] if len(lines) > 2 else "nothing"

    searcher = S3Protocol()
    policy = lambda o, i: searcher.write([Search("founder")]) if i["turn"] == 0 else "<search_complete>True</search_complete>"  # noqa: E731
    runs = []
    for num_envs in (4, 1):
        lm = recording_lm(respond)
        summarizer, generator = LLMSummarizer(lm, max_new_tokens=8), FirstDocGenerator(lm)
        envs = [
            multi_agent.env(("searcher",), corpus_options={"seed": 7, "num_passages": 400}, generator=generator, summarizer=summarizer)
            for _ in range(num_envs)
        ]
        tasks = [Task(ex.id, 0) for ex in envs[0].game.examples[:6]]
        counts = BatchCounts()
        out = run_team_episodes(envs, {"searcher": policy}, tasks, batch_counts=counts)
        runs.append(([{k: v for k, v in r.to_dict().items() if k != "wall_time"} for r in out], counts, lm.batches))
    (together, counts4, batches4), (alone, counts1, batches1) = runs
    assert together == alone and all(r["outcome"] == "finished" and r["num_searches"] == 1 for r in together)
    assert counts4.requests == counts1.requests == sum(batches1) - 6  # the initial summaries run at reset, alone
    assert max(batches4) == 4 and counts4.calls < counts1.calls


@pytest.mark.parametrize("mode", ["rounds", "async"])
def test_team_episodes_hand_each_role_its_final_info_as_single_agent_episodes_do(mode):
    """observe_end (where LM agents check the final turn of their record, render_mismatch)
    gets each role's last info of a team episode that ended in the env, in both drivers;
    an episode that failed gets none."""
    pytest.importorskip("pettingzoo")
    from searchgym.agents.team import run_team_episodes
    from searchgym.envs import multi_agent
    from searchgym.envs.protocols import Complete
    from searchgym.envs.protocols.s3 import S3Protocol

    complete = S3Protocol().write([Complete()])

    class Ending(Agent):
        concurrent = True

        def __init__(self):
            self.ends = []

        def act(self, observations, infos):
            return [complete] * len(observations)

        def observe_end(self, slot, info):
            self.ends.append(info)

    envs = [multi_agent.env(("searcher",), corpus_options={"seed": 7, "num_passages": 400}, generator=exploding_generator) for _ in range(2)]
    examples = envs[0].game.examples[:4]
    agent = Ending()
    out = run_team_episodes(envs, {"searcher": agent}, [Task(ex.id, 0) for ex in examples], mode=mode, concurrency=2 if mode == "async" else None)
    finished = [r for r in out if r.outcome == "finished"]
    assert finished and len(finished) < len(out)  # the generator fails on one question: that episode is not handed over
    assert sorted(i["example_id"] for i in agent.ends) == sorted(r.example_id for r in finished)
    assert all(i["role"] == "searcher" and i["prediction"] == "x" for i in agent.ends)
