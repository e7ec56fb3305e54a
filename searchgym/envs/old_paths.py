"""The module paths of envs/ before it was split into sub-packages, still importable.

``import searchgym.envs.core`` (or ``searchgym.envs.multi_agent``, ...) gives the module now
at its new path: the same module object, so classes, ``isinstance`` checks, pickles and
``gym.register(entry_point="searchgym.envs.core:SearchEnv")`` keep working. A finder answers
only the names in :data:`MOVED`, and only when asked for them (the team game's PettingZoo
module still needs its extra only when imported).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from types import ModuleType

#: Old module (under ``searchgym.envs``) -> its module now (under ``searchgym.envs``).
MOVED = {
    "core": "single.core", "game": "single.game", "spaces": "single.spaces", "checks": "single.checks",
    "wrappers": "single.wrappers", "tasks": "single.tasks",
    "team_game": "team.game", "team_info": "team.info", "team_scoring": "team.scoring", "team_seats": "team.seats",
    "role_env": "team.role_env", "multi_agent": "team.multi_agent", "protocols.team": "team.protocol",
    "frozen": "components.frozen", "lm_frozen": "components.lm_frozen", "summarizers": "components.summarizers",
    "lm_summarizer": "components.lm_summarizer", "model_calls": "components.model_calls",
    "filter_cache": "components.filter_cache", "question_filters": "components.question_filters",
}

PREFIX = "searchgym.envs."


class MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path of :data:`MOVED` and loads it as the module at its new path."""

    def find_spec(self, fullname: str, path=None, target=None):  # noqa: ANN001 (the finder protocol)
        if fullname.startswith(PREFIX) and fullname.removeprefix(PREFIX) in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec) -> ModuleType:  # noqa: ANN001
        return importlib.import_module(PREFIX + MOVED[spec.name.removeprefix(PREFIX)])

    def exec_module(self, module: ModuleType) -> None:
        pass  # the module ran under its new name


def install() -> None:
    """Put the finder last on ``sys.meta_path`` (once): real modules are always found first."""
    if not any(isinstance(finder, MovedModules) for finder in sys.meta_path):
        sys.meta_path.append(MovedModules())
