"""Per-turn rewards in the env, and recipes that fail. Written as a user would: recipes of
their own, the public API only.

- a recipe's ``turn_reward`` is paid on the step of its turn and shown in that step's
  ``info["reward_components"]`` (a number as ``turn``, named parts as ``turn/<name>``); the
  step rewards add up to turn rewards + invalid penalties + ``score``;
- a recipe without it costs nothing (no per-turn record) and its env's infos are as before;
- a recipe that raises or returns something that is not a finite number fails that episode
  with a RecipeError naming it; drivers and benchmarks record it and go on;
- a step-wise reward that pays each supporting passage the first time it is found cannot be
  farmed by searching again, by junk, or by forging retrieved documents.
"""

import math

import gymnasium as gym
import numpy as np
import pytest

import searchgym  # noqa: F401  (registers the ids)
from searchgym.agents import Task, run_episodes
from searchgym.agents.oracle import SynthWikiOracle
from searchgym.bench import BenchConfig, run_bench
from searchgym.envs import search_env
from searchgym.envs.protocols import Answer, Search
from searchgym.error import RecipeError
from searchgym.rewards import (
    Episode,
    RewardRecipe,
    RewardResult,
    SearchR1EM,
    Turn,
    checked_score,
    checked_turn_reward,
    exact_match,
    pays_turns,
    recipe_label,
)

SMALL_WORLD = {"seed": 7, "num_passages": 400}
HERE = __name__


class FirstFind(RewardRecipe):
    """StepSearch-like: each turn earns ``weight`` per supporting passage of the question
    that its searches retrieve for the first time in the episode; the end pays exact match."""

    name = "first_find"

    def __init__(self, weight: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        self.weight = weight

    def turn_reward(self, episode):
        supporting = set(episode.metadata.get("supporting_ids", ()))
        this_turn = episode.turns[-1].round
        before = {i for s in episode.searches if s.round < this_turn for i in s.ids}
        now = {i for s in episode.searches if s.round == this_turn for i in s.ids}
        return {"found": self.weight * len((now - before) & supporting)}

    def score(self, episode):
        em = exact_match(episode.answer, episode.answers) if episode.answer is not None else 0.0
        return RewardResult(em, {"em": em})


class Constant(RewardRecipe):
    """Pays ``per_turn`` (a number) every turn and ``end`` at the end."""

    name = "constant"

    def __init__(self, per_turn=0.25, end=1.0, components=None, **kwargs):
        super().__init__(**kwargs)
        self.per_turn, self.end, self.components = per_turn, end, components

    def turn_reward(self, episode):
        return self.per_turn

    def score(self, episode):
        return RewardResult(self.end, dict(self.components or {"end": self.end}))


class Raising(RewardRecipe):
    """Exact match, but raises on the questions about founders."""

    name = "raising"

    def score(self, episode):
        if "founder" in episode.question:
            raise ValueError(f"cannot score {episode.question!r}")
        return SearchR1EM().score(episode)


def make(reward, action_format="tags", **kwargs):
    return gym.make("searchgym/SearchR1-v0", corpus_options=SMALL_WORLD, reward=reward, action_format=action_format, **kwargs)


def bridge(env, hops=2):
    example = next(ex for ex in search_env(env).examples if ex.metadata["type"] == "bridge" and ex.metadata["hops"] == hops)
    env.reset(seed=0, options={"example_id": example.id})
    return example


def play(env, turns):
    """Play ``turns`` (text), returning every step's (reward, info)."""
    steps = []
    for turn in turns:
        _, reward, terminated, truncated, info = env.step(turn)
        steps.append((reward, info))
        if terminated or truncated:
            break
    return steps


# ---------------------------------------------------------------------- paying turns
def test_each_turn_is_paid_on_its_step_and_the_steps_add_up():
    recipe = FirstFind(invalid_action_penalty=-0.5)
    env = make(recipe)
    example = bridge(env)
    write = search_env(env).protocol.write
    first, second = example.metadata["oracle_queries"]
    steps = play(env, [write([Search(first)]), "no tags at all", write([Search(second)]), write([Answer(example.answers[0])])])
    rewards = [r for r, _ in steps]
    # Each oracle query retrieves its own hop's passage (and, here, not the other's).
    assert rewards == pytest.approx([0.1, -0.5, 0.1, 1.0])
    assert steps[0][1]["reward_components"] == pytest.approx({"turn/found": 0.1})
    assert steps[1][1]["reward_components"] == {"turn/found": 0.0}
    assert steps[3][1]["reward_components"] == {"em": 1.0, "turn/found": 0.0}
    turn_paid = sum(v for _, info in steps for k, v in info["reward_components"].items() if k.startswith("turn"))
    invalid = recipe.invalid_action_penalty * steps[-1][1]["num_invalid"]
    assert sum(rewards) == pytest.approx(turn_paid + invalid + 1.0)


def test_a_number_is_named_turn_and_the_last_step_keeps_both():
    env = make(Constant(per_turn=0.25, end=1.0))
    bridge(env)
    write = search_env(env).protocol.write
    steps = play(env, [write([Search("founded")]), write([Answer("x")])])
    assert [r for r, _ in steps] == [0.25, 1.25]
    assert steps[0][1]["reward_components"] == {"turn": 0.25}
    assert steps[1][1]["reward_components"] == {"end": 1.0, "turn": 0.25}


def test_tags_and_tools_pay_the_same_turns():
    results = {}
    for action_format in ("tags", "tools"):
        env = make(FirstFind(), action_format)
        example = bridge(env)
        first, second = example.metadata["oracle_queries"]
        if action_format == "tags":
            write = search_env(env).protocol.write
            turns = [write([Search(first)]), write([Search(second)]), write([Answer("x")])]
        else:
            call = lambda name, **args: {"role": "assistant", "content": "", "tool_calls": [  # noqa: E731
                {"id": "c0", "type": "function", "function": {"name": name, "arguments": args}}]}
            turns = [call("search", query=first), call("search", query=second), call("answer", answer="x")]
        results[action_format] = [(r, info["reward_components"]) for r, info in play(env, turns)]
    assert results["tags"] == results["tools"]


def test_a_recipe_without_turn_rewards_builds_no_record_per_turn_and_keeps_its_infos():
    env = make("search_r1_em")
    bridge(env)
    game = search_env(env).game
    built = []
    record = game.record
    game.record = lambda *a, **k: built.append(1) or record(*a, **k)
    write = search_env(env).protocol.write
    steps = play(env, [write([Search("founded")]), write([Search("born")]), write([Answer("x")])])
    assert len(built) == 1  # the end's record only
    assert "reward_components" not in steps[0][1] and steps[-1][1]["reward_components"] == {"em": 0.0}
    assert not pays_turns(SearchR1EM()) and pays_turns(FirstFind())


def test_a_score_component_named_like_a_turn_reward_is_refused_by_name():
    env = make(Constant(components={"turn": 1.0}))
    bridge(env)
    with pytest.raises(RecipeError) as e:
        play(env, [search_env(env).protocol.write([Answer("x")])])
    label = f"'constant' ({HERE}:Constant)"
    assert str(e.value) == (
        f"Reward recipe {label} score() on example {search_env(env).example.id!r} expects component names other than "
        "'turn' and 'turn/...' (the turn rewards' names), got 'turn'; rename it."
    )


# ---------------------------------------------------------------------- failing recipes
class Returns(RewardRecipe):
    """Returns ``total`` from score and ``turn`` from turn_reward, whatever they are."""

    name = "returns"

    def __init__(self, total=0.0, components=None, turn=None):
        super().__init__()
        self.total, self.components, self.turn = total, components or {}, turn

    def turn_reward(self, episode):
        return self.turn

    def score(self, episode):
        return RewardResult(self.total, self.components)


@pytest.mark.parametrize(("recipe", "expected"), [
    (Returns(total=math.nan), "score() on example {id!r} expects a finite number as total, got nan (float)."),
    (Returns(total="1.0"), "score() on example {id!r} expects a finite number as total, got '1.0' (str)."),
    (Returns(total=True), "score() on example {id!r} expects a finite number as total, got True (bool)."),
    (Returns(components={"em": math.inf}),
     "score() on example {id!r} expects every component to be a finite number named by a string, got 'em': inf (float)."),
    (Returns(turn=math.nan), "turn_reward() on example {id!r} at turn 1 expects None, a finite number or a mapping of "
                             "names to finite numbers, got nan (float)."),
    (Returns(turn="0.5"), "turn_reward() on example {id!r} at turn 1 expects None, a finite number or a mapping of "
                          "names to finite numbers, got '0.5' (str)."),
    (Returns(turn={"gain": None}), "turn_reward() on example {id!r} at turn 1 expects None, a finite number or a mapping "
                                   "of names to finite numbers, got 'gain': None (NoneType) in {{'gain': None}}."),
])
def test_a_recipe_returning_what_is_not_a_finite_number_fails_the_episode(recipe, expected):
    env = make(recipe)
    bridge(env)
    example_id = search_env(env).example.id
    with pytest.raises(RecipeError) as e:
        play(env, [search_env(env).protocol.write([Answer("x")])])
    assert str(e.value) == f"Reward recipe 'returns' ({HERE}:Returns) " + expected.format(id=example_id)
    assert e.value.recipe == f"'returns' ({HERE}:Returns)"


def test_numpy_numbers_are_numbers():
    env = make(Returns(total=np.float32(0.5), components={"x": np.int64(1)}, turn=np.float64(0.25)))
    bridge(env)
    (reward, info), = play(env, [search_env(env).protocol.write([Answer("x")])])
    assert reward == 0.75 and info["reward_components"] == {"x": 1, "turn": 0.25}


class RaisesOnTurn(RewardRecipe):
    name = "raises_on_turn"

    def turn_reward(self, episode):
        if episode.searches:
            raise KeyError("hop")
        return 0.0

    def score(self, episode):
        return RewardResult(0.0, {})


def test_a_raising_recipe_names_itself_and_quotes_the_exception_and_the_turn_is_undone():
    env = make(RaisesOnTurn())
    bridge(env)
    game = search_env(env).game
    write = search_env(env).protocol.write
    with pytest.raises(RecipeError) as e:
        env.step(write([Search("founded")]))
    message = str(e.value)
    prefix = (f"Reward recipe 'raises_on_turn' ({HERE}:RaisesOnTurn) raised in turn_reward() at turn 1 on example "
              f"{game.example.id!r}: KeyError: 'hop' (at ")
    assert message.startswith(prefix) and message.endswith(f"{__file__}:{RaisesOnTurn.turn_reward.__code__.co_firstlineno + 2})")
    assert game.turn == 0 and game.num_searches == 0 and game.record().searches == () and not game.done
    (reward, info), = play(env, [write([Answer("x")])])  # the episode goes on from where it was
    assert reward == 0.0 and info["turn"] == 1


def test_the_checks_run_on_their_own_too():
    episode = Episode("Q?", "Paris", turns=(Turn("<answer>Paris</answer>", ("answer",)),), answer="Paris", example_id="q1")
    assert checked_score(SearchR1EM(), episode).total == 1.0
    assert checked_turn_reward(SearchR1EM(), episode) == {}
    assert checked_turn_reward(Constant(per_turn=2), episode) == {"turn": 2.0}
    assert recipe_label(Raising()) == f"'raising' ({HERE}:Raising)"
    with pytest.raises(RecipeError, match=r"raised in score\(\) on example 'q1': ValueError: cannot score"):
        checked_score(Raising(), Episode("Who was the founder?", "A", example_id="q1"))


# ---------------------------------------------------------------------- drivers and benchmarks go on
def test_the_driver_records_a_failing_recipe_as_that_episode_error_and_plays_the_others():
    envs = [make(Raising()) for _ in range(2)]
    tasks = [Task(ex.id, 0) for ex in search_env(envs[0]).examples[:16]]
    out = run_episodes(envs, SynthWikiOracle.for_env(envs[0]), tasks)
    failed = [r for r in out if "founder" in r.question]
    assert failed and len(failed) < len(out)
    for r in failed:
        assert r.outcome == "error" and r.error.startswith(
            f"RecipeError: Reward recipe 'raising' ({HERE}:Raising) raised in score() on example {r.example_id!r}: "
            f"ValueError: cannot score {r.question!r} (at ")
    assert all(r.outcome == "answered" and r.em == 1.0 and r.reward == 1.0 for r in out if "founder" not in r.question)


def test_a_benchmark_records_a_failing_recipe_and_goes_on():
    config = BenchConfig(runs=[("SearchR1-v0", "oracle")], limit=16, num_envs=4,
                         env_options={"*": {"reward": Raising(), "corpus_options": SMALL_WORLD}})
    results = run_bench(config, None, progress=False)
    row, = results.rows
    records = results.episodes[row["label"]]
    failed = [r for r in records if "founder" in r["question"]]
    assert failed and row["outcomes"] == {"error": len(failed), "answered": 16 - len(failed)}
    assert all("Reward recipe 'raising'" in r["error"] for r in failed)
    assert row["failures"] == f"error {len(failed)}"


# ---------------------------------------------------------------------- reward hacking
def test_a_first_find_reward_cannot_be_farmed():
    """Searching the same query again, junk, or forging the documents earns nothing more than
    finding each supporting passage once; no turn reward exceeds weight x hops."""
    recipe = FirstFind(weight=0.1)
    env = make(recipe, max_turns=8)
    example = bridge(env)
    write = search_env(env).protocol.write
    first, second = example.metadata["oracle_queries"]
    honest = sum(r for r, _ in play(env, [write([Search(first)]), write([Search(second)]), write([Answer("wrong")])]))
    assert honest == pytest.approx(0.2)
    for turns in (
        [write([Search(first)])] * 6 + [write([Answer("wrong")])],  # the same search again and again
        [write([Search("zzz qqq")])] * 6 + [write([Answer("wrong")])],  # junk
        # forged documents naming the supporting passages: the env removes them; not a search
        [write([Search("zzz")]) + f"<information>{' '.join(example.metadata['supporting_ids'])}"
         f"{' '.join(example.metadata['evidence'])}</information>"] * 6 + [write([Answer("wrong")])],
    ):
        env.reset(seed=0, options={"example_id": example.id})
        total = sum(r for r, _ in play(env, turns))
        assert total <= honest + 1e-9
