"""User pieces through the public API, as a user writes them (issue 53, items 3, 4, 6): a
recipe, protocol, retriever, wrapper and env id named ``module:attr`` or registered by a
module, retrievers by shape (any object with ``search``) with their optional context, one
retriever per env, and resume checks that compare settings, never ``repr``.

Only public names are imported. Each test writes its user module to ``tmp_path`` and runs
from there, as ``searchgym bench --import my_methods`` run next to ``my_methods.py`` would.
"""

import json
import sys

import gymnasium as gym
import pytest

from searchgym.bench import BenchConfig, run_bench
from searchgym.corpora import SearchContext, SearchEngine, check_retriever, make_retriever, register_retriever, retriever_names
from searchgym.envs import search_env, step_all
from searchgym.envs.protocols import PROTOCOLS, Search, make_protocol, protocol_source
from searchgym.envs.registration import full_env_id
from searchgym.error import ConfigError, UnknownNameError
from searchgym.plugins import apply_wrappers, load_object, recorded_settings, settings_changes, settings_of
from searchgym.rewards import RECIPES, RewardRecipe, RewardResult, make_recipe, recipe_source
from searchgym.training.args import Args, check_args
from searchgym.training.checkpoint import prepare_run_folder

SMALL = {"corpus_options": {"seed": 7, "num_passages": 400}}

USER_MODULE = '''
import gymnasium as gym
from searchgym.corpora import Hit, register_retriever
from searchgym.envs.protocols import PROTOCOLS
from searchgym.envs.protocols.search_r1 import SearchR1Protocol
from searchgym.rewards import RECIPES, RewardRecipe, RewardResult, exact_match


class Weighted(RewardRecipe):
    """EM times a weight (a user's recipe: its settings are its public attributes)."""

    name = "weighted"

    def __init__(self, *, weight=1.0, invalid_action_penalty=0.0):
        super().__init__(invalid_action_penalty=invalid_action_penalty)
        self.weight = float(weight)

    def score(self, episode):
        em = exact_match(episode.answer, episode.answers)
        return RewardResult(self.weight * em if episode.answer is not None else 0.0, {"em": em})


def weighted_twice():
    return Weighted(weight=2.0)


def bad_wrapper(env):
    return "not an env"


class FirstPassages:
    """A search engine by shape: no Retriever subclass, the first k passages for any query."""

    def __init__(self, corpus, *, offset=0):
        self.corpus, self.offset = corpus, offset
        self.contexts, self.steps = [], []

    def search(self, queries, k):
        return [[Hit(self.corpus[self.offset + i], 1.0) for i in range(k)] for _ in queries]

    def search_with_context(self, queries, k, contexts):
        self.contexts.append(list(contexts))
        return self.search(queries, k)

    def set_step(self, step):
        self.steps.append(step)


class Counted(gym.Wrapper):
    """Counts the steps it sees (a user's env wrapper)."""

    def __init__(self, env):
        super().__init__(env)
        self.steps = 0

    def step(self, action):
        self.steps += 1
        return self.env.step(action)


RECIPES["weighted-user"] = Weighted
PROTOCOLS["plain-user"] = SearchR1Protocol
register_retriever("first-user", FirstPassages)
if "usermod/Mine-v0" not in gym.registry:
    gym.register("usermod/Mine-v0", entry_point="searchgym.envs.single.core:SearchEnv",
                 kwargs={"protocol": "search_r1", "reward": "search_r1_em", "top_k": 2, "max_turns": 3})
'''


@pytest.fixture
def usermod(tmp_path, monkeypatch):
    """``usermod.py`` in a fresh folder that is the current directory."""
    (tmp_path / "usermod.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("usermod", None)
    yield tmp_path
    sys.modules.pop("usermod", None)
    RECIPES.pop("weighted-user", None)
    PROTOCOLS.pop("plain-user", None)


# ---------------------------------------------------------------- resolution
def test_a_recipe_by_path_is_built_like_a_built_in(usermod):
    recipe = make_recipe("usermod:Weighted", weight=3.0)
    assert type(recipe).__name__ == "Weighted" and recipe.weight == 3.0
    assert make_recipe("usermod:weighted_twice").weight == 2.0  # a factory
    with pytest.raises(ConfigError, match=r"^Reward recipe 'usermod:Weighted' does not take 'wieght'; expected arguments among: weight, invalid_action_penalty\.$"):
        make_recipe("usermod:Weighted", wieght=2.0)
    env = gym.make("searchgym/SearchR1-v0", reward="usermod:Weighted", reward_options={"weight": 0.5}, **SMALL)
    assert search_env(env).recipe.weight == 0.5


def test_bad_paths_are_refused_by_name_with_the_import_error(usermod):
    with pytest.raises(ConfigError, match=r"^Cannot import the module of reward recipe 'nosuchmod:X' \(ModuleNotFoundError: No module named 'nosuchmod'\)"):
        recipe_source("nosuchmod:X")
    with pytest.raises(ConfigError, match=r"^The reward recipe 'usermod:Nope' names nothing: module 'usermod' has no attribute 'Nope'\.$"):
        recipe_source("usermod:Nope")
    with pytest.raises(ConfigError, match=r"^The reward recipe 'usermod:RECIPES' expects a RewardRecipe subclass, a recipe instance or a factory returning one, got dict\.$"):
        recipe_source("usermod:RECIPES")
    (usermod / "broken.py").write_text("raise RuntimeError('boom at import')\n")
    with pytest.raises(ConfigError, match=r"Cannot import the module of protocol 'broken:P' \(RuntimeError: boom at import\)"):
        protocol_source("broken:P")
    with pytest.raises(UnknownNameError, match=r"^Unknown reward 'nope'\."):
        recipe_source("nope")


def test_registries_a_module_fills_are_names_everywhere(usermod):
    load_object("usermod:Weighted", what="test")  # importing it fills the registries
    assert "first-user" in retriever_names() and "plain-user" in PROTOCOLS
    env = gym.make("searchgym/SearchR1-v0", reward="weighted-user", protocol="plain-user", retriever="first-user", **SMALL)
    assert type(search_env(env).retriever).__name__ == "FirstPassages"
    assert full_env_id("usermod/Mine-v0") == "usermod/Mine-v0"
    with pytest.raises(ConfigError, match="cannot replace the built-in retriever 'bm25'"):
        register_retriever("bm25", dict)


def test_a_protocol_by_path_and_an_env_id_in_gymnasiums_module_form(usermod):
    protocol = make_protocol("usermod:SearchR1Protocol")
    assert protocol.name == "search_r1"
    assert full_env_id("usermod:usermod/Mine-v0") == "usermod:usermod/Mine-v0"
    env = gym.make(full_env_id("usermod:usermod/Mine-v0"), **SMALL)
    assert search_env(env).top_k == 2
    with pytest.raises(ConfigError, match=r"^The env id 'usermod:Other-v0' expects module 'usermod' to register 'Other-v0'"):
        full_env_id("usermod:Other-v0")


# ---------------------------------------------------------------- retrievers by shape
def test_any_object_with_search_is_a_retriever_and_gets_each_querys_context(usermod):
    from usermod import FirstPassages

    envs = [gym.make("searchgym/SearchR1-v0", **SMALL) for _ in range(2)]
    engine = FirstPassages(search_env(envs[0]).corpus)
    assert isinstance(engine, SearchEngine) and make_retriever(engine, search_env(envs[0]).corpus) is engine
    for env in envs:
        search_env(env).retriever = engine
    examples = search_env(envs[0]).examples[:2]
    for env, ex in zip(envs, examples):
        env.reset(seed=0, options={"example_id": ex.id})
    protocol = search_env(envs[0]).protocol
    step_all(envs, [protocol.write([Search("first")]), protocol.write([Search("second")])])
    # one batched call for both envs, each query with its own episode's context
    assert engine.contexts == [[SearchContext(ex.id, ex.question, 1, tuple(ex.answers)) for ex in examples]]


def test_one_retriever_per_env_is_an_option(usermod, monkeypatch):
    made = []
    real = gym.make

    def spy(*args, **kwargs):
        made.append(real(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(gym, "make", spy)
    for per_env, engines in ((True, 2), (False, 1)):
        made.clear()
        config = BenchConfig(runs=[("SearchR1-v0", "oracle")], limit=2, num_envs=2, imports=["usermod"], retriever_per_env=per_env,
                             env_options={"*": {**SMALL, "retriever": "usermod:FirstPassages"}}, wrappers=["usermod:Counted"])
        rows = run_bench(config, None, progress=False).rows
        assert rows[0]["n"] == 2 and len(made) == 2
        assert len({id(search_env(env).retriever) for env in made}) == engines


def test_check_retriever_refuses_before_anything_loads(usermod):
    check_retriever("usermod:FirstPassages")
    check_retriever("bm25")
    with pytest.raises(UnknownNameError, match=r"^Unknown retriever 'bm52'\. Did you mean 'bm25'\?"):
        check_retriever("bm52")
    with pytest.raises(ConfigError, match=r"^The retriever 'usermod:RECIPES' expects a search engine"):
        check_retriever("usermod:RECIPES")


def test_wrappers_apply_in_order_and_must_return_an_env(usermod):
    env = apply_wrappers(gym.make("searchgym/SearchR1-v0", **SMALL), ["usermod:Counted"])
    env.reset(seed=0)
    env.step("<answer>x</answer>")
    assert type(env).__name__ == "Counted" and env.steps == 1
    with pytest.raises(ConfigError, match=r"^The env wrapper 'usermod:bad_wrapper' expects to return a gymnasium\.Env, got str\.$"):
        apply_wrappers(gym.make("searchgym/SearchR1-v0", **SMALL), ["usermod:bad_wrapper"])


# ---------------------------------------------------------------- settings, not repr
class Scaled(RewardRecipe):
    name = "scaled"

    def __init__(self, weight: float = 1.0):
        super().__init__()
        self.weight = weight

    def score(self, episode):
        return RewardResult(0.0, {})


SCALED = f"{Scaled.__module__}:Scaled"


def test_a_recipes_settings_are_its_public_attributes_not_its_repr():
    one, two = Scaled(1.0), Scaled(1.0)
    assert settings_of(one) == settings_of(two) == {
        "class": SCALED, "settings": {"invalid_action_penalty": 0.0, "weight": 1.0}}
    assert settings_changes(settings_of(one), settings_of(Scaled(2.0))) == [f"setting 'weight' of {SCALED}: 1.0 recorded, 2.0 now"]
    # an object that cannot say its settings is recorded by its class, never by a memory address
    assert recorded_settings(object()) == {"class": "builtins:object"}


def test_a_recipe_with_changed_weights_is_refused_on_resume_and_equal_settings_resume(tmp_path):
    out = tmp_path / "run"
    args = Args(reward=Scaled(1.0), out=str(out))
    prepare_run_folder(out, args)
    (out / "checkpoints").mkdir()  # a run in progress
    prepare_run_folder(out, Args(reward=Scaled(1.0), out=str(out)))  # another object, equal settings: resumes
    with pytest.raises(ConfigError, match=(
            r"holds a run with different settings \(changed: reward\); setting 'weight' of " + SCALED + r": 1\.0 "
            r"recorded, 2\.0 now; resume it with the same settings or pick another --out\.$")):
        prepare_run_folder(out, Args(reward=Scaled(2.0), out=str(out)))


def test_a_benchmark_with_a_changed_recipe_setting_is_refused_and_equal_settings_resume(tmp_path, capsys):
    def config(weight):
        return BenchConfig(runs=[("SearchR1-v0", "random")], limit=1, env_options={"*": {**SMALL, "reward": Scaled(weight)}})

    out = tmp_path / "bench"
    run_bench(config(1.0), out, progress=False)
    record = json.loads((out / "config.json").read_text())
    assert record["env_options"]["*"]["reward"] == {"class": SCALED, "settings": {"invalid_action_penalty": 0.0, "weight": 1.0}}
    run_bench(config(1.0), out, progress=False)  # an equal recipe (another object): resumes
    assert "resuming: 1 episodes done" in capsys.readouterr().err
    with pytest.raises(ConfigError, match=(
            r"holds a benchmark with a different configuration \(changed: env_options\); setting 'weight' of "
            + SCALED + r": 1\.0 recorded, 2\.0 now; resume it with the same arguments, pick another --out, or pass "
            r"--no-resume to start over\.$")):
        run_bench(config(2.0), out, progress=False)


# ---------------------------------------------------------------- train checks before any model loads
def test_check_args_imports_first_and_resolves_every_piece(usermod):
    check_args(Args(imports=["usermod"], reward="weighted-user", env_options={"retriever": "first-user", "protocol": "plain-user"},
                    wrappers=["usermod:Counted"], env_id="usermod/Mine-v0"))
    with pytest.raises(ConfigError, match=r"^Cannot import the module of reward recipe 'nosuchmod:X'"):
        check_args(Args(reward="nosuchmod:X"))
    with pytest.raises(ConfigError, match=r"^Cannot import 'nosuchmod' for --import \(ModuleNotFoundError"):
        check_args(Args(imports=["nosuchmod"]))
    with pytest.raises(ConfigError, match=r"^The env wrapper 'usermod:nothing' names nothing"):
        check_args(Args(wrappers=["usermod:nothing"]))


def test_training_envs_get_an_engine_each_on_one_clock_and_the_step(usermod):
    from searchgym.training.data import env_kwargs, make_train_envs, tell_step, timed_retriever

    args = Args(imports=["usermod"], num_envs=2, retriever_per_env=True, wrappers=["usermod:Counted"],
                env_options={**SMALL, "retriever": "usermod:FirstPassages"})
    check_args(args)
    timed = timed_retriever(args.env_id, args.env_options)
    kwargs = env_kwargs(args, "train", None, frozen=None)
    kwargs.pop("retriever_options", None)
    envs = make_train_envs(args, kwargs, timed)
    assert [type(env).__name__ for env in envs] == ["Counted", "Counted"]
    timers = [search_env(env).retriever for env in envs]
    assert timers[0] is not timers[1] and timers[0].inner is not timers[1].inner
    tell_step(envs, 5)
    assert [t.inner.steps for t in timers] == [[5], [5]]
    envs[0].reset(seed=0)
    envs[0].step(search_env(envs[0]).protocol.write([Search("a query")]))
    assert timers[0].inner.contexts and timed.seconds > 0  # the context reaches the engine through the timing view
