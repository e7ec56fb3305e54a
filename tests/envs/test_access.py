"""search_env and team_game reach the searchgym env under wrappers, or say what is wrong."""

import gymnasium as gym
import pytest

from env_helpers import make_small
from searchgym.envs import RoleEnv, SearchEnv, StrictActions, TeamGame, search_env, team_game
from searchgym.error import ConfigError


def test_search_env_unwraps_gymnasium_wrappers():
    env = StrictActions(make_small("searchgym/SearchR1-v0"))
    inner = search_env(env)
    assert isinstance(inner, SearchEnv) and inner is env.unwrapped and search_env(inner) is inner
    assert inner.protocol.name == "search_r1" and inner.examples and inner.game.top_k == inner.top_k == 3


def test_search_env_of_a_role_env_and_its_team_game():
    env = gym.make("searchgym/MultiAgentSearcher-v0", corpus_options={"seed": 7, "num_passages": 400})
    inner = search_env(env)
    assert isinstance(inner, RoleEnv) and inner.protocol.name == "s3"
    assert isinstance(team_game(env), TeamGame) and team_game(env) is inner.game


def test_other_envs_get_a_clear_error():
    env = gym.make("CartPole-v1")
    with pytest.raises(ConfigError, match=r"^Expected a searchgym env such as gym.make\('searchgym/SearchR1-v0'\) \(wrapped or not\), got "):
        search_env(env)
    with pytest.raises(ConfigError, match=r"^Expected a searchgym multi-agent env .* got CartPole"):
        team_game(env.unwrapped)
    with pytest.raises(ConfigError, match="around SearchEnv"):
        team_game(make_small("searchgym/SearchR1-v0"))
