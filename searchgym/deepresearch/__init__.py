"""The offline deep-research game: search, open long documents page by page, find inside them,
answer with citations; scored by correctness and by the evidence the agent read and cited.

- :mod:`.documents`: the document store (pages, bounded find) over the env's corpus;
- :mod:`.protocol`: the protocol (tools ``search``, ``open``, ``find``, ``answer``; a tag grammar);
- :mod:`.scoring`: the metrics (evidence and gold recall, citation precision and recall,
  calibration error) and the reward recipe.

The env id is ``searchgym/DeepResearch-v0`` (:data:`searchgym.envs.registration.GAME_ENV_SPECS`);
its world is the generated ``deepwiki`` corpus, or BrowseComp-Plus's files by path
(docs/deep-research.md).
"""

from searchgym.deepresearch.documents import DocumentStore, FindResult, Page
from searchgym.deepresearch.protocol import CitedAnswer, DeepResearchProtocol, Find, Open

__all__ = ["CitedAnswer", "DeepResearchProtocol", "DocumentStore", "Find", "FindResult", "Open", "Page"]
