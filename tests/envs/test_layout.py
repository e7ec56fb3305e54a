"""envs/ in rooms: the old module paths still import as the same modules, and the one
registry of values bound to objects' lifetimes drops them with their owners."""

import gc
import importlib
import pickle
import sys
import weakref

import gymnasium as gym
import pytest
from env_helpers import make_small

import searchgym.envs
from searchgym.envs.components.lifetimes import LifetimeRegistry
from searchgym.envs.old_paths import MOVED
from searchgym.error import ConfigError


@pytest.mark.parametrize("old, new", sorted(MOVED.items()))
def test_every_old_module_path_imports_as_the_module_now(old, new):
    if "multi_agent" in old:
        pytest.importorskip("pettingzoo")
    moved = importlib.import_module(f"searchgym.envs.{old}")
    assert moved is importlib.import_module(f"searchgym.envs.{new}")


def test_old_paths_serve_names_entry_points_and_pickles():
    from searchgym.envs.core import SearchEnv
    from searchgym.envs.single.core import SearchEnv as Now

    assert SearchEnv is Now is searchgym.envs.SearchEnv
    gym.register(id="searchgym-test/OldPath-v0", entry_point="searchgym.envs.core:SearchEnv", kwargs={"max_turns": 2})
    try:
        env = gym.make("searchgym-test/OldPath-v0")
        env.reset(seed=0)
        copy = pickle.loads(pickle.dumps(env.unwrapped))
        assert type(copy) is Now and copy.max_turns == 2
    finally:
        gym.registry.pop("searchgym-test/OldPath-v0")


def test_an_unknown_path_under_envs_is_still_an_import_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("searchgym.envs.no_such_module")


class Owner:
    """An object that can be referenced weakly."""


class Slotted:
    """An object that cannot: ``__slots__`` without ``__weakref__``."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


def test_a_value_is_made_once_and_dropped_with_its_owner():
    registry = LifetimeRegistry()
    owner = Owner()
    made = []
    first = registry.get(("k", id(owner)), lambda: made.append(1) or object(), owners=(owner,))
    assert registry.get(("k", id(owner)), lambda: made.append(1) or object(), owners=(owner,)) is first
    assert made == [1] and len(registry) == 1
    del owner
    gc.collect()
    assert len(registry) == 0


def test_an_owner_that_cannot_be_referenced_weakly_gets_a_private_value_or_is_kept_alive():
    with pytest.raises(TypeError):
        weakref.ref(Slotted("x"))
    registry = LifetimeRegistry()
    owner = Slotted("a")
    one = registry.get(("k", id(owner)), object, owners=(owner,), unbound="private")
    two = registry.get(("k", id(owner)), object, owners=(owner,), unbound="private")
    assert one is not two and len(registry) == 0  # nothing kept: a reused id could not be told apart

    kept = Slotted("b")
    key = ("k", id(kept))
    value = registry.get(key, object, owners=(kept, Owner()), unbound="keep")
    # the weakly referable owner is gone at once (it was a temporary) and takes the value with it
    gc.collect()
    assert key not in registry
    stays = Owner()
    value = registry.get(key, object, owners=(kept, stays), unbound="keep")
    del kept
    gc.collect()
    assert registry.get(key, object, owners=(), unbound="keep") is value  # the slotted owner lives with it
    registry.clear()
    assert len(registry) == 0


def test_a_bad_policy_is_refused():
    with pytest.raises(ConfigError, match=r"LifetimeRegistry.get expects unbound to be one of \('private', 'keep'\), got 'drop'"):
        LifetimeRegistry().get("k", object, unbound="drop")


class SlottedGenerator:
    """A frozen generator that cannot be referenced weakly: answers with the first gold
    answer its documents hold, counting its calls."""

    __slots__ = ("golds", "calls")

    def __init__(self, golds):
        self.golds, self.calls = golds, [0]

    def __call__(self, question, docs, **kwargs):
        self.calls[0] += 1
        text = "\n".join(docs)
        return next((g for g in self.golds if g in text), "Nobody")


def test_the_s3_filter_keeps_a_generator_it_cannot_watch_alive_and_asks_it_once():
    from searchgym.envs.components.filter_cache import clear_filter_cache

    clear_filter_cache()
    examples = make_small("searchgym/S3-v0", split="train").unwrapped.examples
    generator = SlottedGenerator(sorted({a for ex in examples for a in ex.answers}, key=len, reverse=True))
    with pytest.raises(TypeError):
        weakref.ref(generator)
    alone = sys.getrefcount(generator)
    first = make_small("searchgym/S3-v0", split="train", question_filter="s3", generator=generator, limit=10)
    asked = generator.calls[0]
    assert asked >= 10
    second = make_small("searchgym/S3-v0", split="train", question_filter="s3", generator=generator, limit=10)
    assert generator.calls[0] == asked  # the same setting: nothing asked again
    assert [ex.id for ex in second.unwrapped.examples] == [ex.id for ex in first.unwrapped.examples]
    del first, second
    gc.collect()
    assert sys.getrefcount(generator) == alone + 1  # the verdicts' store holds it: its id stays its own
    clear_filter_cache()
    assert sys.getrefcount(generator) == alone
