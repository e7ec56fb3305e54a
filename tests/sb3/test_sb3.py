"""Stable-Baselines3: the template wrapper, PPO / DQN training, and the trained policy in the bench."""

import json

import numpy as np
import pytest

from env_helpers import SMALL_WORLD, make_small
from searchgym.corpora.types import Passage
from searchgym.sb3.env import TemplateActions
from searchgym.sb3.templates import GLOBAL_FEATURES, SLOT_FEATURES, reformulate
from searchgym.error import ConfigError, SearchGymError

SMALL = {"corpus_options": SMALL_WORLD}


class Recorder:
    """A frozen generator that answers with the first word of its first document and
    remembers what it was given (it does not read the gold answers)."""

    def __init__(self):
        self.calls = []

    def __call__(self, question, docs):
        self.calls.append((question, list(docs)))
        return docs[0].split()[0] if docs else ""


def names(env):
    return {n: i for i, n in enumerate(env.template_names)}


@pytest.mark.parametrize("env_id", ["searchgym/SearchR1-v0", "searchgym/S3-v0", "searchgym/RSearch-v0"])
def test_wrapper_passes_sb3_check_env(env_id):
    from stable_baselines3.common.env_checker import check_env

    env = TemplateActions(make_small(env_id))
    check_env(env)
    top_k = env.unwrapped.top_k
    assert env.action_space.n == top_k + 3
    assert env.observation_space.shape == (len(GLOBAL_FEATURES) + top_k * len(SLOT_FEATURES),)


def test_templates_search_select_and_answer_from_the_selection():
    generator = Recorder()
    env = TemplateActions(make_small("searchgym/SearchR1-v0"), generator=generator, passage_cost=0.1)
    a = names(env)
    obs, info = env.reset(options={"example_index": 0})
    question = info["question"]
    assert obs.dtype == np.float32 and info["action_mask"][a["search_question"]] and not info["action_mask"][a["select_1"]]

    obs, reward, terminated, truncated, info = env.step(a["search_question"])
    assert info["query"] == question and info["turn"] == 1 and len(info["retrieved_ids"]) == 3
    assert len(info["retrieved_scores"]) == 3 and info["retrieved_scores"][0] >= info["retrieved_scores"][-1]
    first_window = list(info["retrieved_ids"])
    assert not info["action_mask"][a["search_question"]]  # the question was searched already

    obs, reward, terminated, truncated, info = env.step(a["select_2"])  # no env turn
    assert (reward, terminated, info["turn"], info["template_steps"]) == (0.0, False, 1, 2)
    assert not info["action_mask"][a["select_2"]]
    obs, reward, *_ , info = env.step(a["select_2"])  # selected already: invalid, costs the penalty
    assert reward == pytest.approx(-0.05) and info["template_invalid"] and info["turn"] == 1

    obs, reward, terminated, truncated, info = env.step(a["final"])
    assert terminated and not truncated
    (asked, docs), = generator.calls
    chosen = env.unwrapped.corpus.get(first_window[1])
    assert asked == question and docs == [f"{chosen.title}\n{chosen.text}"]
    assert info["answer"] == chosen.text.split()[0]
    # The env's EM reward, minus the passage cost of the one passage answered from.
    assert reward == pytest.approx(info["reward_components"]["em"] - 0.1)
    with pytest.raises(SearchGymError, match="finished episode"):
        env.step(a["final"])


def test_unannotated_searches_are_answered_from_whole_and_reformulation_searches_a_new_name():
    generator = Recorder()
    env = TemplateActions(make_small("searchgym/SearchR1-v0"), generator=generator)
    a = names(env)
    _, info = env.reset(options={"example_index": 3})
    _, _, _, _, info = env.step(a["search_question"])
    first = info["retrieved_ids"]
    _, _, _, _, info = env.step(a["search_reform"])
    assert info["query"] and info["query"].lower() != env.unwrapped.example.question.lower()
    second = info["retrieved_ids"]
    env.step(a["final"])
    (_, docs), = generator.calls
    # No selection in either search: every passage of both, each once (s3's rule).
    expected = list(dict.fromkeys(first + second))
    assert docs == [f"{env.unwrapped.corpus.get(i).title}\n{env.unwrapped.corpus.get(i).text}" for i in expected]


def test_reformulate_takes_the_new_names_of_the_sentence_closest_to_the_question():
    passage = Passage("p", "Blue Harbor", "Blue Harbor is a town. It was founded by Mara Quill in the north.")
    assert reformulate("Who founded the town of Blue Harbor?", passage) == "Mara Quill"
    assert reformulate("Who founded Blue Harbor?", Passage("q", "Blue Harbor", "nothing new here.")) == "Blue Harbor"


def test_s3_sends_selections_with_the_next_turn_and_the_env_generator_answers():
    env = TemplateActions(make_small("searchgym/S3-v0"))
    a = names(env)
    _, info = env.reset(options={"example_index": 0})
    initial = info["retrieved_ids"]
    env.step(a["select_1"])
    env.step(a["select_3"])
    _, reward, terminated, _, info = env.step(a["final"])
    assert terminated and info["selected_ids"] == [initial[0], initial[2]]
    assert "gen_acc" in info["reward_components"]


def test_searches_stop_at_the_turn_budget_and_the_step_budget_forces_the_end():
    env = TemplateActions(make_small("searchgym/SearchR1-v0", max_turns=2), generator=Recorder(), max_steps=4)
    a = names(env)
    env.reset(options={"example_index": 1})
    _, _, _, _, info = env.step(a["search_question"])
    # Turn 2 is the last: it cannot search, so both search templates are masked and invalid.
    assert not info["action_mask"][a["search_question"]] and not info["action_mask"][a["search_reform"]]
    _, reward, terminated, _, info = env.step(a["search_reform"])
    assert reward == pytest.approx(-0.05) and not terminated and info["num_searches"] == 1
    env.step(a["search_reform"])
    _, _, terminated, truncated, info = env.step(a["search_reform"])  # step 4 of 4: forced final
    assert terminated and not truncated and info["answer"] is not None


def test_wrapper_rejects_bad_arguments_and_actions():
    with pytest.raises(ConfigError, match="env's own frozen generator"):
        TemplateActions(make_small("searchgym/S3-v0"), generator="gold-span")
    with pytest.raises(ConfigError, match="invalid_penalty to be a non-negative number"):
        TemplateActions(make_small("searchgym/SearchR1-v0"), invalid_penalty=-1)
    with pytest.raises(ConfigError, match="max_steps to be a positive integer"):
        TemplateActions(make_small("searchgym/SearchR1-v0"), max_steps=0)
    import gymnasium as gym

    with pytest.raises(ConfigError, match="expects a searchgym SearchEnv"):
        TemplateActions(gym.make("CartPole-v1"))
    env = TemplateActions(make_small("searchgym/SearchR1-v0"))
    env.reset(seed=0)
    for bad in (99, -1, "search", 1.5):
        with pytest.raises(ConfigError, match=r"template number in \[0, 6\)"):
            env.step(bad)


# ---------------------------------------------------------------- training
QUICK = {
    "env_options": SMALL, "num_envs": 2, "eval_limit": 5, "eval_every": 128, "progress": False,
}


@pytest.fixture(scope="module")
def ppo_run(tmp_path_factory):
    from searchgym.sb3.train import SB3Args, train_sb3

    out = tmp_path_factory.mktemp("sb3") / "ppo"
    rows = train_sb3(SB3Args(algorithm="sb3-ppo", total_timesteps=256, sb3_options={"n_steps": 64, "batch_size": 64}, out=str(out), **QUICK))
    return out, rows


def test_ppo_trains_and_writes_a_run_folder_that_resumes(ppo_run):
    from searchgym.sb3.train import SB3Args, train_sb3

    out, rows = ppo_run
    assert [r["step"] for r in rows] == [0, 128, 256]
    assert all(np.isfinite(r["eval_reward"]) for r in rows) and rows[-1]["episodes"] > 0
    assert {p.name for p in out.iterdir()} >= {"model.zip", "policy.json", "metrics.csv", "curves.png"}
    record = json.loads((out / "policy.json").read_text())
    assert record["algorithm"] == "sb3-ppo" and record["timesteps"] == 256 and record["num_actions"] == 6
    # Running again with a larger budget continues from timestep 256.
    more = train_sb3(SB3Args(algorithm="sb3-ppo", total_timesteps=384, sb3_options={"n_steps": 64, "batch_size": 64}, out=str(out), **QUICK))
    assert [r["step"] for r in more] == [0, 128, 256, 384]
    with pytest.raises(ConfigError, match="holds a sb3-ppo run"):
        train_sb3(SB3Args(algorithm="sb3-dqn", total_timesteps=512, out=str(out), **QUICK))


def test_dqn_trains(tmp_path):
    from searchgym.sb3.train import SB3Args, train_sb3

    rows = train_sb3(SB3Args(algorithm="sb3-dqn", total_timesteps=256, sb3_options={"learning_starts": 64}, out=str(tmp_path), **QUICK))
    assert rows[-1]["step"] == 256 and (tmp_path / "model.zip").is_file()


def test_sb3_args_are_checked_before_any_env_is_built(tmp_path):
    from searchgym.sb3.train import SB3Args, train_sb3

    for bad, match in (
        ({"algorithm": "sb3-a2c"}, "Unknown Stable-Baselines3 algorithm 'sb3-a2c'"),
        ({"total_timesteps": 0}, "total_timesteps to be a positive integer"),
        ({"net_arch": []}, "net_arch to be a list of positive layer sizes"),
        ({"sb3_options": {"learning_rate": 1.0}}, "use the flags --lr"),
        ({"lr": float("nan")}, "lr to be a positive number"),
    ):
        with pytest.raises(SearchGymError, match=match):
            train_sb3(SB3Args(out=str(tmp_path), **bad))
    assert not any(tmp_path.iterdir())  # nothing was written


def test_train_command_dispatches_to_sb3_and_rejects_mixed_flags(tmp_path, capsys):
    from searchgym.cli import main

    out = tmp_path / "cli"
    code = main([
        "train", "--algo", "sb3-ppo", "--total-timesteps", "128", "--eval-every", "128", "--num-envs", "2", "--eval-limit", "3",
        "--env-options", json.dumps(SMALL), "--sb3-options", '{"n_steps": 64, "batch_size": 64}', "--no-progress", "--out", str(out),
    ])
    assert code == 0 and (out / "model.zip").is_file()
    assert "eval reward" in capsys.readouterr().out
    assert main(["train", "--algo", "sb3-ppo", "--lora-rank", "4", "--out", str(tmp_path / "x")]) == 2
    assert "--lora-rank configures language-model training" in capsys.readouterr().err
    assert main(["train", "--algorithm", "grpo", "--passage-cost", "0.1", "--out", str(tmp_path / "y")]) == 2
    assert "--passage-cost configures --algorithm sb3-ppo" in capsys.readouterr().err


# ---------------------------------------------------------------- the policy as an agent
class FeaturePolicy:
    """A policy of the features alone: search the question, keep the first passage,
    search a reformulation, keep its first passage, answer."""

    observation_space = None

    def predict(self, obs, deterministic=True):
        obs = np.atleast_2d(obs)
        g = {name: obs[:, i] for i, name in enumerate(GLOBAL_FEATURES)}
        first_selected = obs[:, len(GLOBAL_FEATURES) + SLOT_FEATURES.index("selected")]
        actions = np.full(len(obs), 5)
        actions[first_selected == 0] = 2
        actions[(first_selected == 1) & (g["reformulations_fraction"] == 0) & (g["can_search"] == 1)] = 1
        actions[g["question_searched"] == 0] = 0
        return actions, None


@pytest.mark.parametrize("which", ["scripted", "ppo"])
def test_agent_plays_exactly_what_the_wrapper_plays(ppo_run, which):
    """The bench agent rebuilds the wrapper's features from the env's info: the same policy
    takes the same turns and reaches the same answer on every question."""
    from searchgym.agents import Task, make_agent, run_episodes
    from searchgym.sb3.agent import load_policy

    model = FeaturePolicy() if which == "scripted" else load_policy(ppo_run[0])[0]
    wrapped = TemplateActions(make_small("searchgym/SearchR1-v0"), generator=Recorder())
    expected = {}
    for i in range(6):
        obs, info = wrapped.reset(options={"example_index": i})
        done = False
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, _, terminated, truncated, info = wrapped.step(int(np.asarray(action).reshape(-1)[0]))
            done = terminated or truncated
        expected[info["example_id"]] = (info["num_searches"], info["prediction"], info["reward_components"]["em"])
    if which == "scripted":
        assert all(searches == 2 for searches, _, _ in expected.values())

    envs = [make_small("searchgym/SearchR1-v0") for _ in range(3)]
    agent = make_agent("sb3", envs[0], policy=model, generator=Recorder())
    examples = envs[0].unwrapped.examples[:6]
    results = run_episodes(envs, agent, [Task(ex.id, 0) for ex in examples], progress=False)
    assert {r.example_id: (r.num_searches, r.prediction, r.em) for r in results} == expected


def test_agent_in_the_bench_with_an_lm_reader(ppo_run, tmp_path):
    from searchgym.bench import BenchConfig, run_bench
    from searchgym.lm.scripted import ScriptedLM
    from searchgym.lm.testing import tiny_tokenizer

    out, _ = ppo_run
    lm = ScriptedLM(lambda prompt: "Answer: a reader reply", tiny_tokenizer())
    config = BenchConfig(
        runs=[("SearchR1-v0", "sb3"), ("SearchR1-v0", "random")], model=lm, limit=3, num_envs=2,
        env_options={"*": SMALL}, agent_options={"sb3": {"policy": str(out)}},
    )
    results = run_bench(config, tmp_path / "bench", progress=False)
    sb3_row = results.rows[0]
    assert sb3_row["n"] == 3 and sb3_row["failures"] == "-" and sb3_row["generated_tokens"] > 0
    assert all(r["prediction"] == "a reader reply" for r in results.episodes["sb3 @ SearchR1-v0"])
    with pytest.raises(ConfigError, match="--agent-option sb3:policy=runs/sb3"):
        run_bench(BenchConfig(runs=[("SearchR1-v0", "sb3")], model=lm), None, progress=False)


def test_agent_rejects_a_policy_it_cannot_play(ppo_run, tmp_path):
    from searchgym.agents import make_agent

    out, _ = ppo_run
    with pytest.raises(ConfigError, match="model.zip and policy.json"):
        make_agent("sb3", make_small("searchgym/SearchR1-v0"), policy=str(tmp_path), generator=Recorder())
    with pytest.raises(ConfigError, match="reads 35 features but the env \\(top_k=5\\) gives 51"):
        make_agent("sb3", make_small("searchgym/SearchR1-v0", top_k=5), policy=str(out), generator=Recorder())
    with pytest.raises(ConfigError, match="pass lm="):
        from searchgym.sb3.agent import SB3Agent

        SB3Agent.for_env(make_small("searchgym/SearchR1-v0"), policy=str(out))
    with pytest.raises(ConfigError, match="must not read the gold answers"):
        from searchgym.rewards import GoldSpanReader

        make_agent("sb3", make_small("searchgym/SearchR1-v0"), policy=str(out), generator=GoldSpanReader())


def test_package_imports_without_stable_baselines3():
    """SB3 is optional: searchgym.sb3 imports without it, and building a model says what to install."""
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['stable_baselines3'] = None\n"
        "import searchgym.sb3\n"
        "from searchgym.error import MissingDependencyError\n"
        "try:\n    searchgym.sb3.algorithm_class('sb3-ppo')\n"
        "except MissingDependencyError as e:\n    print('missing:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("missing:") and "stable-baselines3" in out and "sb3" in out
