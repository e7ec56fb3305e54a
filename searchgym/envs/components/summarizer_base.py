"""The interface every summarizer implements (RECON's slot): ``summarize(question, query, hits)``.

Below both :mod:`searchgym.envs.components.summarizers` (the built-in ones and
:func:`~searchgym.envs.components.summarizers.make_summarizer`) and
:mod:`searchgym.envs.components.lm_summarizer` (RECON's language-model summarizer).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from searchgym.corpora.types import Hit


class Summarizer(ABC):
    """Condenses the hits of one search into text for the agent."""

    name: str
    #: True when the protocol should render the raw documents itself.
    passthrough: bool = False

    @abstractmethod
    def summarize(self, question: str, query: str, hits: Sequence[Hit]) -> str:
        """Condensed text of ``hits`` for ``query`` asked while answering ``question``."""
