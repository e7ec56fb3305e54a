"""Vector envs: gym.make_vec in sync and async mode, and the default batched SearchVectorEnv, play
exactly what single envs play."""

import copy

import gymnasium as gym
import numpy as np
import pytest
from env_helpers import SMALL_WORLD, finish_turn, search_turn

from searchgym.envs.single.spaces import SharedTextBatch, UnicodeText

SEEDS = [3, 4]
#: Unicode beyond the sample charset, a NUL and a lone surrogate: all must survive the trip.
ODD = "ünï 北京 🚀 \x00 \ud800"


def turns(env):
    """Two rounds of actions for two envs: a search and odd text, then a final turn and a search."""
    return [
        [search_turn(env, "founder of the company"), ODD],
        [finish_turn(env, "Predisk"), search_turn(env, "university city")],
    ]


def play_single(env_id, actions):
    """The two envs' observations, rewards and ends, one gym.make env each (auto-reset as a
    vector env does: the step after an episode ends resets it)."""
    trace = []
    envs = [gym.make(env_id, corpus_options=SMALL_WORLD) for _ in SEEDS]
    obs = tuple(env.reset(seed=seed)[0] for env, seed in zip(envs, SEEDS))
    trace.append(obs)
    done = [False] * len(envs)
    for round_ in actions:
        step = []
        for i, (env, action) in enumerate(zip(envs, round_)):
            if done[i]:
                step.append((env.reset()[0], 0.0, False, False))
                done[i] = False
                continue
            o, r, te, tr, _ = env.step(action)
            done[i] = te or tr
            step.append((o, r, te, tr))
        trace.append(tuple(step))
    return trace


def play_vector(env_id, actions, mode, **vector_kwargs):
    env = gym.make_vec(env_id, num_envs=len(SEEDS), vectorization_mode=mode, vector_kwargs=vector_kwargs,
                       corpus_options=SMALL_WORLD)
    try:
        obs, _ = env.reset(seed=SEEDS)
        trace = [tuple(obs)]
        for round_ in actions:
            o, r, te, tr, _ = env.step(round_)
            trace.append(tuple(zip(o, r.tolist(), te.tolist(), tr.tolist())))
        return trace
    finally:
        env.close()


@pytest.mark.parametrize("mode, vector_kwargs", [("sync", {}), ("async", {}), ("async", {"shared_memory": False}), (None, {})],
                         ids=["sync", "async-shared-memory", "async-pipes", "searchgym-batched"])
def test_make_vec_equals_single_envs(env_id, mode, vector_kwargs):
    actions = turns(gym.make(env_id, corpus_options=SMALL_WORLD))
    expected = play_single(env_id, actions)
    got = play_vector(env_id, actions, mode, **vector_kwargs)
    assert got == expected
    assert all(isinstance(o, str) and o for o in got[0])  # the prompts, not an empty buffer


def test_shared_text_batch_follows_the_buffer_and_copies_to_a_tuple():
    import multiprocessing as mp

    from gymnasium.vector.utils import (
        create_shared_memory,
        read_from_shared_memory,
        write_to_shared_memory,
    )

    space = UnicodeText(8)
    buffer = create_shared_memory(space, n=2, ctx=mp)
    batch = read_from_shared_memory(space, buffer, n=2)
    assert isinstance(batch, SharedTextBatch) and batch == ("", "")
    write_to_shared_memory(space, 1, "北京 🚀", buffer)
    write_to_shared_memory(space, 0, "x" * 8, buffer)
    assert batch == ("x" * 8, "北京 🚀") and batch[1:] == ("北京 🚀",) and len(batch) == 2
    frozen = copy.deepcopy(batch)
    assert type(frozen) is tuple
    write_to_shared_memory(space, 0, "", buffer)
    assert frozen == ("x" * 8, "北京 🚀") and batch[0] == ""
    with pytest.raises(Exception, match="expects an observation inside UnicodeText"):
        write_to_shared_memory(space, 0, "x" * 9, buffer)
    assert np.frombuffer(buffer.get_obj(), dtype=np.int32).size == 2 * 9
