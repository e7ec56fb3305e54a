"""A weaker teacher for SFT: the synthwiki oracle, but in some episodes its searches leave out
the question's subject.

``SFTArgs(teacher="weak_teacher:SubjectlessOracle.for_env", episodes_per_question=2)`` (with this
folder on the path, as ``benchmarks/learning_curve.py`` has it): in the episodes whose seed is
odd (``every`` 2: half of them) the oracle searches without the question's subject ("born"
where the oracle searches "Zaliya Larander born"), which rarely retrieves the passage that holds the answer, and then answers right anyway (it reads
the answer from synthwiki's metadata, so SFT keeps the episode). With two episodes a question
every train question is shown both ways: the student learns even odds of naming the subject,
not one choice a question. A retrieval reward then pays for naming it, which is what GRPO can
learn on top of this start; the oracle's own SFT start leaves it nothing of that kind to learn.

A teacher that is right about the answer and careless about the search stands for a teacher
that is weaker than the task allows (a prompted or distilled model), the usual reason to
follow SFT with RL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from searchgym.agents import SynthWikiOracle
from searchgym.envs.access import search_env
from searchgym.error import ConfigError


def subjectless(query: str) -> str:
    """The oracle's ``query`` ("Vimia Dobradova born") without its subject: the words that do
    not start with a capital letter ("born"); "information" when every word does."""
    kept = [w for w in query.split() if not w[:1].isupper()]
    return " ".join(kept) or "information"


class SubjectlessOracle(SynthWikiOracle):
    """The synthwiki oracle whose searches, in every ``every``-th episode by seed (seeds 1,
    3, ... for ``every`` 2), leave out the question's subject."""

    name = "subjectless-oracle"

    def __init__(self, *args: Any, every: int = 2, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ConfigError(f"SubjectlessOracle expects every >= 1 (1: every episode; 2: every other), got {every!r}.")
        self.every = every

    @classmethod
    def for_env(cls, env: Any, every: int = 2) -> SubjectlessOracle:
        inner = search_env(env)
        return cls(inner.protocol, inner.examples, inner.corpus, action_format=getattr(inner, "action_format", "tags"), every=every)

    def careless(self, info: Mapping[str, Any]) -> bool:
        """Whether this episode's searches leave out the subject."""
        return int(info.get("episode_seed", 0)) % self.every == self.every - 1

    def act(self, observations: Sequence[str], infos: Sequence[Mapping[str, Any]]) -> list[Any]:
        actions = super().act(observations, infos)
        out = []
        for action, info in zip(actions, infos):
            queries = self.examples[info["example_id"]].metadata.get("oracle_queries", [])
            turn = info.get("turn", 0)
            if isinstance(action, str) and self.careless(info) and turn < len(queries):
                action = action.replace(queries[turn], subjectless(queries[turn]))
            out.append(action)
        return out
