"""searchgym: Gymnasium environments for search-augmented question answering.

Importing the package registers ``searchgym/SearchR1-v0``, ``searchgym/R1Searcher-v0``,
``searchgym/RECON-v0``, ``searchgym/S3-v0`` and ``searchgym/RSearch-v0``, and the
single-agent views of the multi-agent game ``searchgym/MultiAgentSearcher-v0``,
``searchgym/MultiAgentSummarizer-v0`` and ``searchgym/MultiAgentGenerator-v0``. The
PettingZoo env itself is ``searchgym.envs.team.multi_agent`` (``search_team_v0``).
"""

from searchgym.envs.registration import register_envs

__version__ = "0.1.0"

register_envs()
