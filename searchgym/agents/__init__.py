"""Agents that play the environment, and the driver that runs many episodes at once.

LM agents (:class:`EndToEndAgent`, :class:`SearcherAgent`, :class:`EvidenceAgent`) and the
baselines import torch-free code only; the models they use come from :mod:`searchgym.lm`.
"""

from searchgym.agents.base import Agent, play_episode
from searchgym.agents.driver import EpisodeResult, Task, run_episodes
from searchgym.agents.oracle import SynthWikiOracle
from searchgym.agents.registry import AGENTS, LM_FREE, make_agent, register_agent, unregister_agent
from searchgym.agents.team import TeamResult, run_team_episodes, team_agents
from searchgym.agents.trajectory import Segment, Trajectory

__all__ = [
    "AGENTS", "LM_FREE", "Agent", "EpisodeResult", "Segment", "SynthWikiOracle", "Task", "TeamResult", "Trajectory",
    "make_agent", "play_episode", "register_agent", "run_episodes", "run_team_episodes", "team_agents", "unregister_agent",
]
