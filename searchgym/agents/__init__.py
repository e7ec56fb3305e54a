"""Agents that play the environment: baselines and scripted agents."""

from searchgym.agents.base import Agent, play_episode
from searchgym.agents.oracle import SynthWikiOracle

__all__ = ["Agent", "SynthWikiOracle", "play_episode"]
