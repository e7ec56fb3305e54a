"""The multi-agent env: PettingZoo's own test utilities on both forms and every kind of
roster, each role's observations and rewards with scripted players, malformed turns,
config errors, the runner, and one role trained by the single-agent trainer while the
others stay frozen."""

import re
import warnings

import gymnasium as gym
import pytest

pytest.importorskip("pettingzoo")
from env_helpers import SMALL_WORLD  # noqa: E402
from lm_helpers import recording_lm  # noqa: E402
from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test, seed_test  # noqa: E402

from searchgym.agents.driver import Task  # noqa: E402
from searchgym.agents.team import run_team_episodes, team_agents  # noqa: E402
from searchgym.envs import multi_agent  # noqa: E402
from searchgym.envs.protocols import Complete, Search, Select  # noqa: E402
from searchgym.envs.protocols.s3 import S3Protocol  # noqa: E402
from searchgym.envs.registration import (  # noqa: E402
    MULTI_AGENT_ENVS,
    ROLE_ENV_SPECS,
    full_env_id,
    make_multi_agent,
)
from searchgym.envs.single.checks import check_search_env, fuzz_actions  # noqa: E402
from searchgym.envs.team.game import TeamGame  # noqa: E402
from searchgym.envs.team.protocol import GeneratorProtocol, SummarizerProtocol, Summary  # noqa: E402
from searchgym.error import ConfigError, SearchGymError, UnknownNameError  # noqa: E402
from searchgym.lm.scripted import ScriptedLM  # noqa: E402
from searchgym.lm.testing import tiny_tokenizer  # noqa: E402

SMALL = {"corpus_options": SMALL_WORLD}
ROSTERS = [("searcher", "summarizer", "generator"), ("searcher", "generator"), ("searcher", "summarizer"), ("searcher",)]
#: A two-hop question of the small world whose naive top-3 retrieval lacks the answer.
BRIDGE = "swq-00078"  # "In which city is the university attended by Mano Rirdelli located?" -> Predisk
S3, SUMMARIZER, GENERATOR = S3Protocol(), SummarizerProtocol(), GeneratorProtocol()
EXAMPLES = {ex.id: ex for ex in TeamGame(("searcher",), **SMALL).examples}


# ---------------------------------------------------------------- PettingZoo's checks
@pytest.mark.parametrize("roles", ROSTERS, ids="+".join)
def test_pettingzoo_api_parallel_and_seed_tests_pass(roles):
    with warnings.catch_warnings():
        # PettingZoo warns that text observations are not NumPy arrays; the checks themselves must pass.
        warnings.simplefilter("ignore")
        api_test(multi_agent.env(roles, **SMALL), num_cycles=100)
        parallel_api_test(multi_agent.parallel_env(roles, **SMALL), num_cycles=100)
        seed_test(lambda: multi_agent.env(roles, **SMALL), num_cycles=100)
        parallel_seed_test(lambda: multi_agent.parallel_env(roles, **SMALL), num_cycles=100)


def test_the_env_is_discoverable_by_name():
    assert MULTI_AGENT_ENVS == {"search_team_v0": "searchgym.envs.team.multi_agent"}
    aec = make_multi_agent("search_team_v0", roles=("searcher", "generator"), **SMALL)
    par = make_multi_agent("search_team_v0", parallel=True, **SMALL)
    assert aec.metadata["name"] == par.metadata["name"] == multi_agent.NAME == "search_team_v0"
    assert aec.possible_agents == ["searcher", "generator"] and par.possible_agents == ["searcher", "summarizer", "generator"]
    with pytest.raises(UnknownNameError, match=re.escape("Unknown multi-agent env 'search_team_v1'. Did you mean 'search_team_v0'?")):
        make_multi_agent("search_team_v1")


def test_action_sampling_is_seedable_and_reads_as_text():
    env = multi_agent.raw_env(**SMALL)
    a, b = env.action_space("searcher"), env.action_space("generator")
    assert a is not b and a is env.action_space("searcher")
    a.seed(3)
    first = [a.sample() for _ in range(3)]
    a.seed(3)
    assert [a.sample() for _ in range(3)] == first and all(isinstance(s, str) for s in first)


# ---------------------------------------------------------------- scripted players
def documents(observation):
    """The ``[Doc i] title: text`` lines of the summarizer's latest retrieval."""
    block = observation.rsplit("<documents>", 1)[1].split("</documents>", 1)[0]
    return [line for line in block.strip().splitlines() if line]


def play(env, players, example_id=BRIDGE):
    """Play one AEC episode with ``players[agent](observation, info) -> str``; the summed
    rewards, the per-step rewards of each agent, and the last infos."""
    env.reset(seed=0, options={"example_id": example_id})
    totals = dict.fromkeys(env.possible_agents, 0.0)
    steps = {a: [] for a in env.possible_agents}
    infos = None
    for agent in env.agent_iter():
        observation, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            infos = infos or dict(env.infos)
            env.step(None)
            continue
        env.step(players[agent](observation, info))
        for a, r in env.rewards.items():
            totals[a] += r
        steps[agent].append(env.rewards[agent])
    return totals, steps, infos


def oracle_searcher(select=True):
    """Issues the question's solution queries; keeps the supporting documents when ``select``."""
    def searcher(observation, info):
        example = EXAMPLES[info["example_id"]]
        queries = example.metadata["oracle_queries"]
        keep = tuple(i for i, pid in enumerate(info["retrieved_ids"], 1) if pid in example.metadata["supporting_ids"])
        actions = [Select(keep)] if select else []
        actions.append(Search(queries[info["turn"]]) if info["turn"] < len(queries) else Complete())
        return S3.write(actions)
    return searcher


def complete_searcher(observation, info):
    return S3.write([Complete()])


# ---------------------------------------------------------------- rewards
def test_a_searcher_that_finds_the_answer_gains_beyond_rag():
    env = multi_agent.raw_env(("searcher",), **SMALL)
    totals, _, infos = play(env, {"searcher": oracle_searcher()})
    assert totals == {"searcher": 1.0}
    info = infos["searcher"]
    assert info["reward_components"] == {"gen_acc": 1.0, "naive_rag_acc": 0.0, "gain_beyond_rag": 1.0, "num_invalid": 0.0}
    assert info["prediction"] == "Predisk" and info["context_ids"] == ["sw-000344", "sw-000281"]
    # Naive RAG through the team gains nothing: the baseline is the same documents.
    totals, _, _ = play(multi_agent.raw_env(("searcher",), **SMALL), {"searcher": complete_searcher})
    assert totals == {"searcher": 0.0}


def test_a_searcher_that_writes_no_valid_turn_earns_the_floor_whatever_the_team_answers():
    # Doing nothing earns nothing: the frozen generator still answers from the initial
    # retrieval, but the searcher gets GenAcc 0, so its gain is minus the naive-RAG GenAcc.
    baselines = []
    for example_id in list(EXAMPLES)[:6]:
        env = multi_agent.raw_env(("searcher",), invalid_action_penalty=0.0, **SMALL)
        totals, _, infos = play(env, {"searcher": lambda o, i: "I don't know."}, example_id)
        info = infos["searcher"]
        baseline = info["reward_components"]["naive_rag_acc"]
        assert info["reward_components"]["gen_acc"] == 0.0
        assert totals == {"searcher": -baseline}
        baselines.append(baseline)
    assert 1.0 in baselines  # some question where naive RAG answers: the idle searcher loses it


def test_the_generators_reward_is_its_answer_score_and_the_searcher_is_scored_on_that_answer():
    env = multi_agent.raw_env(("searcher", "generator"), **SMALL)
    seen = {}

    def generator(observation, info):
        seen["observation"], seen["messages"] = observation, info["prompt_messages"]
        return "<answer>It is Predisk.</answer>"

    totals, _, infos = play(env, {"searcher": oracle_searcher(), "generator": generator})
    assert totals == {"searcher": 1.0, "generator": 1.0}  # s3's GenAcc: the gold span is in the answer
    assert infos["generator"]["reward_components"] == {"answer_score": 1.0, "num_invalid": 0.0}
    assert infos["generator"]["answer"] == "It is Predisk."
    # It read s3's generator prompt over the two documents the searcher kept.
    assert seen["messages"][0]["role"] == "system" and seen["messages"][1] == {"role": "user", "content": EXAMPLES[BRIDGE].question}
    assert "Doc 1 (Title: Mano Rirdelli)" in seen["observation"] and "Doc 2 (Title: Husdalusk University)" in seen["observation"]

    strict = multi_agent.raw_env(("searcher", "generator"), answer_metric="em", **SMALL)
    totals, _, _ = play(strict, {"searcher": oracle_searcher(), "generator": generator})
    assert totals == {"searcher": 1.0, "generator": 0.0}  # not an exact match; GBR stays GenAcc
    totals, _, _ = play(strict, {"searcher": oracle_searcher(), "generator": lambda o, i: "Predisk"})
    assert totals == {"searcher": 1.0, "generator": 1.0}
    totals, _, _ = play(env, {"searcher": oracle_searcher(), "generator": lambda o, i: "<answer>Zirramith</answer>"})
    assert totals == {"searcher": -0.0, "generator": 0.0}
    # The generator agent's own answer is held to every hedging rule: a sentence stating one
    # answer keeps its credit, two candidates or the pasted documents score as a wrong answer.
    totals, _, _ = play(env, {"searcher": oracle_searcher(), "generator": lambda o, i: "<answer>The university is in Predisk.</answer>"})
    assert totals == {"searcher": 1.0, "generator": 1.0}
    totals, _, _ = play(env, {"searcher": oracle_searcher(), "generator": lambda o, i: "<answer>Predisk or Zirramith</answer>"})
    assert totals == {"searcher": -0.0, "generator": 0.0}
    totals, _, _ = play(env, {"searcher": oracle_searcher(), "generator": lambda o, i: f"<answer>{o}</answer>"})
    assert totals == {"searcher": -0.0, "generator": 0.0}


def test_the_summarizer_pays_for_the_context_it_writes():
    cost = 0.001
    env = multi_agent.raw_env(("searcher", "summarizer"), context_cost=cost, **SMALL)

    def summarizer(keep):
        return lambda observation, info: SUMMARIZER.write([Summary("\n".join(keep(documents(observation))) or "No relevant information.")])

    short = summarizer(lambda docs: [d for d in docs if "Predisk" in d])
    long = summarizer(lambda docs: docs)
    searcher = oracle_searcher(select=False)  # every window reaches the generator whole
    results = {}
    for name, player in {"short": short, "long": long, "none": summarizer(lambda docs: [])}.items():
        totals, _, infos = play(env, {"searcher": searcher, "summarizer": player})
        results[name] = (totals["summarizer"], infos["summarizer"]["reward_components"])
    (short_reward, short_c), (long_reward, long_c), (none_reward, none_c) = results["short"], results["long"], results["none"]
    assert short_c["answer_score"] == long_c["answer_score"] == 1.0 and none_c["answer_score"] == 0.0
    assert short_c["summary_tokens"] < long_c["summary_tokens"]
    assert short_reward == pytest.approx(1.0 - cost * short_c["summary_tokens"])
    assert long_reward == pytest.approx(1.0 - cost * long_c["summary_tokens"])
    assert short_reward > long_reward > none_reward  # copying the documents costs, losing the answer costs more
    # Three retrievals (the question, then two searches), three summaries of 3 words when empty-handed.
    assert none_c["summary_tokens"] == 9 and none_reward == pytest.approx(-9 * cost)


def test_each_role_reads_its_own_prompt_and_the_searcher_reads_the_summaries():
    env = multi_agent.raw_env(**SMALL)
    env.reset(seed=0, options={"example_id": BRIDGE})
    assert env.agent_selection == "summarizer"
    prompt = env.observe("summarizer")
    assert prompt.startswith("You condense search results") and f"Question: {EXAMPLES[BRIDGE].question}" in prompt
    assert f"Search query: {EXAMPLES[BRIDGE].question}" in prompt and "[Doc 1] Mano Rirdelli: " in prompt
    assert env.observe("searcher") == "" and env.observe("generator") == ""
    assert env.infos["summarizer"]["prompt_messages"] == [{"role": "user", "content": prompt}]
    assert env.infos["summarizer"]["acting"] and not env.infos["searcher"]["acting"]
    env.step("<summary>Mano Rirdelli studied at Husdalusk University.</summary>")
    searcher_prompt = env.observe("searcher")
    assert searcher_prompt.startswith("You are a search copilot")
    assert "Doc 1 (Title: Summary of the results for: " in searcher_prompt and "Mano Rirdelli studied at Husdalusk University." in searcher_prompt
    assert env.observe("summarizer") == ""  # it read its prompt
    env.step(S3.write([Search("Husdalusk University located")]))
    assert env.agent_selection == "summarizer"
    assert env.observe("summarizer").startswith("\n\nSearch query: Husdalusk University located\n<documents>\n[Doc 1] Husdalusk University")
    env.step("Husdalusk University is in Predisk.")  # no tags: the whole turn is the summary
    assert env.observe("searcher") == "\n\n<information>Doc 1(Title: Summary of the results for: Husdalusk University located) Husdalusk University is in Predisk.</information>\n\n"
    env.step(S3.write([Select((1,)), Complete()]))
    assert env.agent_selection == "generator"
    assert "Husdalusk University is in Predisk." in env.observe("generator")
    env.step("Predisk")
    assert all(env.terminations.values())
    assert env.rewards["generator"] == 1.0 and env.rewards["searcher"] == 1.0
    assert env.rewards["summarizer"] == pytest.approx(1.0 - 0.001 * (6 + 5))
    transcript = env.transcript("summarizer")
    assert transcript.startswith(prompt) and "Husdalusk University is in Predisk." in transcript


def test_without_a_summarizer_raw_documents_pass_or_the_component_condenses_them():
    raw = multi_agent.raw_env(("searcher",), **SMALL)
    raw.reset(options={"example_id": BRIDGE})
    assert "Doc 1 (Title: Mano Rirdelli) Mano Rirdelli" in raw.observe("searcher")
    condensed = multi_agent.raw_env(("searcher",), summarizer="extractive", **SMALL)
    condensed.reset(options={"example_id": BRIDGE})
    assert "Doc 1 (Title: Summary of the results for: " in condensed.observe("searcher")
    assert condensed.infos["searcher"]["summary_tokens"] > 0


# ---------------------------------------------------------------- malformed turns
def test_malformed_turns_are_counted_penalised_and_never_crash():
    env = multi_agent.raw_env(**SMALL)
    env.reset(seed=0, options={"example_id": BRIDGE})
    env.step("   ")  # empty summary: the raw documents go on
    assert env.rewards["summarizer"] == -0.1 and env.infos["summarizer"]["invalid_reason"] == "empty summary"
    assert "Doc 1 (Title: Mano Rirdelli) Mano Rirdelli" in env.observe("searcher")
    env.step("I think I will look something up.")
    assert env.rewards["searcher"] == -0.1 and env.infos["searcher"]["invalid_reason"] == "no <query> or true <search_complete>"
    assert env.observe("searcher") == S3.invalid_feedback() and env.agent_selection == "searcher"
    env.step('<information>Doc 1 Predisk</information><query>{"query": "Husdalusk University located"}</query>')
    assert env.infos["searcher"]["forged_env_tags"] and env.rewards["searcher"] == -0.1  # forged block dropped, query run
    assert env.agent_selection == "summarizer" and env.infos["summarizer"]["query"] == "Husdalusk University located"
    assert env.infos["summarizer"]["retrieved_ids"][0] == "sw-000281"
    env.step("<summary>Husdalusk University is in Predisk.</summary>")
    env.step(S3.write([Complete()]))
    env.step("")  # empty answer
    assert env.infos["generator"]["prediction"] is None and env.rewards["generator"] == -0.1
    assert env.infos["generator"]["num_invalid"] == 1 and env.infos["searcher"]["num_invalid"] == 2
    for agent in list(env.agents):
        env.step(None)
    assert env.agents == []

    # Fuzzed turns of every role's tags, many episodes: the game always ends, nothing raises.
    fuzz = {role: fuzz_actions(protocol, 300, seed=1) for role, protocol in zip(("searcher", "summarizer", "generator"), (S3, SUMMARIZER, GENERATOR))}
    episodes = 0
    env.reset(seed=2)
    for n in range(300):
        agent = env.agent_selection
        observation, reward, terminated, truncated, info = env.last()
        assert env.observation_space(agent).contains(observation)
        if terminated:
            env.step(None)
            if not env.agents:
                episodes += 1
                env.reset()
            continue
        env.step(fuzz[agent][n])
    assert episodes >= 10


def test_wrong_action_types_and_turns_raise_typed_errors():
    env = multi_agent.raw_env(**SMALL)
    env.reset(seed=0)
    with pytest.raises(SearchGymError, match=re.escape("The summarizer expects its action to be a str (one turn of text), got int.")):
        env.step(123)
    with pytest.raises(SearchGymError, match=re.escape("It is the summarizer's turn, got an action for the generator.")):
        env.game.act("generator", "Predisk")
    par = multi_agent.parallel_env(**SMALL)
    observations, infos = par.reset(seed=0)
    with pytest.raises(ConfigError, match=re.escape("SearchTeamParallelEnv.step expects an action for the 'summarizer' agent (whose turn it is, infos['summarizer']['acting']), got actions for ['searcher'].")):
        par.step({"searcher": "<search_complete>True</search_complete>"})
    # Only the acting agent's action is played; the others may send anything.
    observations, rewards, terminations, _, infos = par.step({"summarizer": "<summary>x</summary>", "searcher": S3.write([Complete()]), "generator": None})
    assert infos["searcher"]["acting"] and infos["searcher"]["turn"] == 0 and observations["searcher"].startswith("You are a search copilot")
    assert not any(terminations.values())


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"roles": ("searcher", "critic")}, UnknownNameError, "Unknown role 'critic'. Expected one of: generator, searcher, summarizer."),
        ({"roles": ()}, ConfigError, "The multi-agent env expects at least one role, got an empty roster; the searcher is always needed."),
        ({"roles": ("summarizer", "generator")}, ConfigError, "The multi-agent env expects the searcher in every roster (it drives the episode), got ['summarizer', 'generator']; add 'searcher'"),
        ({"roles": ("searcher", "searcher")}, ConfigError, "The multi-agent env expects each role at most once in roles, got ['searcher', 'searcher']."),
        ({"roles": "searcher"}, ConfigError, "The multi-agent env expects roles to be a list of role names among searcher, summarizer, generator, got 'searcher'"),
        ({"summarizer": "extractive"}, ConfigError, "The summarizer is an agent in this roster ['searcher', 'summarizer', 'generator'], and summarizer='extractive' sets the component"),
        ({"context_cost": -1}, ConfigError, "The multi-agent env expects context_cost to be a finite number >= 0, got -1."),
        ({"invalid_action_penalty": 0.5}, ConfigError, "The multi-agent env expects invalid_action_penalty to be a finite number <= 0, got 0.5."),
        ({"answer_metric": "genacc"}, UnknownNameError, "Unknown answer metric 'genacc'. Did you mean 'gen_acc'? Expected one of: em, f1, gen_acc."),
        ({"top_k": 0}, ConfigError, "The multi-agent env expects top_k to be a positive integer, got 0."),
        ({"max_turns": 3}, ConfigError, "SearchTeamEnv does not take 'max_turns'; expected options among: corpus, dataset, split,"),
        ({"generator": None}, ConfigError, "The multi-agent env expects generator= (the frozen generator of the naive-RAG baseline"),
        ({"render_mode": "rgb_array"}, UnknownNameError, "Unknown render mode 'rgb_array'. Expected one of: ansi, human."),
    ],
)
def test_bad_configurations_say_what_was_expected(kwargs, error, message):
    with pytest.raises(error, match="^" + re.escape(message)):
        multi_agent.raw_env(**{**SMALL, **kwargs})


def test_unknown_reset_options_warn_and_known_ones_pick_the_question():
    env = multi_agent.raw_env(**SMALL)
    with pytest.warns(UserWarning, match=re.escape("reset expects options among ['example', 'example_id', 'example_index'], got ['options']; ignoring them.")):
        env.reset(seed=0, options={"options": 1})
    env.reset(options={"example_index": 6})
    assert env.infos["searcher"]["example_id"] == BRIDGE
    with pytest.raises(ConfigError, match=re.escape("reset(options={'example_id': ...}) expects the id of a question in this env's dataset, got 'nope'.")):
        env.reset(options={"example_id": "nope"})


# ---------------------------------------------------------------- the runner


def test_llm_agents_play_the_roles_in_batches_with_token_records():
    def respond(prompt):
        if "search copilot" in prompt:
            return "<important_info>[1]</important_info><search_complete>True</search_complete>"
        return "Predisk"

    lm = recording_lm(respond)
    envs = [multi_agent.env(("searcher", "generator"), **SMALL) for _ in range(2)]
    agents = team_agents(lm, ("searcher", "generator"))
    tasks = [Task(BRIDGE, 0), Task(BRIDGE, 1), Task("swq-00014", 0)]
    results = run_team_episodes(envs, agents, tasks, keep_trajectories=True)
    assert [r.example_id for r in results] == [BRIDGE, BRIDGE, "swq-00014"]
    for r in results:
        assert r.outcome == "finished" and r.prediction == "Predisk"
        assert r.turns == {"searcher": 1, "generator": 1}
        assert r.rewards["generator"] == r.gen_acc
        for role, trajectory in r.trajectories.items():
            assert trajectory.num_generated == r.generated_tokens[role] > 0
            assert trajectory.loss_mask == [1] * trajectory.num_generated  # one turn each: all generated
    assert results[0].rewards == {"searcher": 1.0, "generator": 1.0}  # Predisk is right, naive RAG gets 0
    assert 2 in lm.batches  # both envs' searcher turns went in one generate call

    # A scripted callable plays a role as well; every roster role needs a policy.
    mixed = run_team_episodes(envs[:1], {"searcher": lambda o, i: S3.write([Complete()]), "generator": agents["generator"]}, tasks[:1])
    assert mixed[0].outcome == "finished" and mixed[0].turns["searcher"] == 1
    with pytest.raises(ConfigError, match=re.escape("run_team_episodes expects a policy for every role of the roster ['searcher', 'generator'], missing ['generator'].")):
        run_team_episodes(envs, {"searcher": agents["searcher"]}, tasks)


# ---------------------------------------------------------------- one role trained, the others frozen
@pytest.mark.parametrize("env_id", sorted(ROLE_ENV_SPECS))
def test_role_views_pass_the_search_env_checks(env_id):
    assert full_env_id(env_id.removeprefix("searchgym/")) == env_id
    env = gym.make(env_id, **SMALL)
    check_search_env(env, fuzz=40)
    role = ROLE_ENV_SPECS[env_id]["role"]
    assert env.unwrapped.protocol.name == {"searcher": "s3", "summarizer": "summarizer", "generator": "generator"}[role]


def test_policy_agent_plays_each_role_view():
    from searchgym.agents.lm_agents import LMAgent, SearcherAgent, policy_agent

    lm = ScriptedLM(["x"], tiny_tokenizer())
    assert isinstance(policy_agent(gym.make("searchgym/MultiAgentSearcher-v0", **SMALL), lm), SearcherAgent)
    agent = policy_agent(gym.make("searchgym/MultiAgentSummarizer-v0", **SMALL), lm)
    assert type(agent) is LMAgent and agent.protocol.stop_strings == ("</summary>",)


def test_the_summarizer_view_plays_the_frozen_roles_between_its_turns():
    frozen_calls = []
    searcher_lm = recording_lm(lambda prompt: "")
    from searchgym.agents.lm_agents import SearcherAgent

    class Recording(SearcherAgent):
        def act_with_generations(self, observations, infos):
            frozen_calls.append(infos[0]["turn"])
            return [oracle_searcher(select=False)(observations[0], infos[0])], [None]

    env = gym.make("searchgym/MultiAgentSummarizer-v0", policies={"searcher": Recording(searcher_lm, "s3")}, context_cost=0.01, **SMALL)
    observation, info = env.reset(seed=0, options={"example_id": BRIDGE})
    assert info["turn"] == 0 and observation.startswith("You condense search results") and "prompt_messages" in info
    rewards, observations = [], []
    done = False
    while not done:
        keep = [d for d in documents(observation) if "Predisk" in d] or ["No relevant information."]
        observation, reward, terminated, truncated, info = env.step(SUMMARIZER.write([Summary(" ".join(keep))]))
        rewards.append(reward)
        observations.append(observation)
        done = terminated or truncated
    assert terminated and not truncated and frozen_calls == [0, 1, 2]
    assert observations[0].startswith("\n\nSearch query: Mano Rirdelli educated") and observations[-1] == ""
    assert rewards[:-1] == [0.0, 0.0] and info["turn"] == 3
    assert rewards[-1] == pytest.approx(1.0 - 0.01 * info["reward_components"]["summary_tokens"])
    assert info["prediction"] == "Predisk" and set(info["team_rewards"]) == {"searcher", "summarizer"}


def test_the_built_in_oracle_searcher_makes_the_summarizer_condense_every_hop():
    env = gym.make("searchgym/MultiAgentSummarizer-v0", policies={"searcher": "oracle"}, **SMALL)
    observation, info = env.reset(options={"example_id": BRIDGE})
    queries = []
    done = False
    while not done:
        queries.append(info["query"])
        observation, reward, terminated, truncated, info = env.step(SUMMARIZER.write([Summary(" ".join(documents(observation)))]))
        done = terminated or truncated
    assert queries == [EXAMPLES[BRIDGE].question, "Mano Rirdelli educated", "Husdalusk University located"]
    assert info["num_searches"] == 2 and info["prediction"] == "Predisk"
    assert reward == pytest.approx(1.0 - 0.001 * info["reward_components"]["summary_tokens"])


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"role": "critic"}, "Unknown role 'critic'. Expected one of: generator, searcher, summarizer."),
        ({"policies": {"summarizer": "extractive"}}, "RoleEnv trains the summarizer, so it cannot also have a policy in policies"),
        ({"policies": {"searcher": "oracel"}}, "Unknown searcher policy 'oracel'. Did you mean 'oracle'? Expected one of: complete, oracle."),
        ({"policies": {"searcher": "complete", "generator": "gold-span"}}, "The generator has no built-in policy names, got 'gold-span'. Pass an agent or a callable"),
        ({"policies": {"searcher": 3}}, "A searcher policy must be an agent (with act(observations, infos)), a callable (observation, info) -> str or one of the names ['complete', 'oracle'], got int."),
        ({"roles": ("searcher", "summarizer", "generator")}, "RoleEnv needs a policy for every other role of the roster, missing ['generator']"),
        ({"roles": ("searcher", "generator"), "policies": {"searcher": "complete", "generator": lambda o, i: "x"}}, "RoleEnv trains the summarizer, which must be in roles, got ['searcher', 'generator']."),
        ({"reward": "s3_gbr"}, "RoleEnv does not take 'reward'; expected options among: corpus, dataset,"),
    ],
)
def test_role_view_configuration_errors(kwargs, message):
    with pytest.raises(SearchGymError, match="^" + re.escape(message)):
        gym.make("searchgym/MultiAgentSummarizer-v0", **{**SMALL, **kwargs})


def test_the_trainer_trains_the_summarizer_while_the_searcher_and_generator_stay_frozen(tmp_path):
    torch = pytest.importorskip("torch")
    from searchgym.lm.testing import tiny_model_folder
    from searchgym.training.args import Args
    from searchgym.training.trainer import Trainer

    args = Args(
        model=str(tiny_model_folder()), env_id="MultiAgentSummarizer-v0", out=str(tmp_path / "run"),
        env_options={**SMALL, "top_k": 1, "initial_top_k": 1, "context_cost": 0.02}, algorithm="grpo", n=2,
        questions_per_step=2, num_envs=4, total_steps=2, max_new_tokens=12, micro_batch_size=2, lr=1e-3,
        save_every=2, progress=False, tensorboard=False, seed=0, threads=1,
    )
    trainer = Trainer(args)
    trainer.build()
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    results, _ = trainer.rollout(0)
    tok = trainer.tokenizer
    for r in results:
        # Only the summarizer's turns are in its token record: its prompt, then its summary.
        assert "You condense search results" in tok.decode(r.trajectory.prompt_ids)
        assert "search copilot" not in tok.decode(r.trajectory.context_ids())
        assert sum(r.trajectory.loss_mask) == r.trajectory.num_generated > 0
        assert r.outcome == "completed" and r.reward <= 0.0  # random summaries: no answer, a context cost
    rows = trainer.train()
    assert [row["step"] for row in rows] == [1, 2] and all(row["episodes"] == 4 for row in rows)
    assert all(row["reward_std"] > 0 for row in rows)  # summaries of different lengths cost differently
    assert any(not torch.equal(before[n], p) for n, p in trainer.model.named_parameters())
    assert (tmp_path / "run" / "final" / "config.json").is_file()
