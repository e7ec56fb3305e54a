"""The package's layers, read from the source: imports point one way, no private name is
imported across modules, and only the envs reach through ``.unwrapped``.

Layers, lowest first (issue 25: error <- rewards/corpora <- envs <- lm/agents <-
training/bench/cli, integrations at the edge):

    0 foundation    error, cache, progress, plugins (module:attr paths, --import, settings)
    1 parts         rewards, corpora, lm
    2 envs          envs, and the package itself (importing searchgym registers the envs)
    3 agents        agents
    4 applications  training, methods (the methods after the papers), bench, cli, demo, oracle_demo, serve (and serve_access), view
    5 edge          integrations (TRL, verl), sb3: adapters to other engines

``lm`` sits with rewards and corpora, below the envs: it depends on nothing of ours but
error, cache and progress, and the env components that call a model (LLM summarizer, frozen
generator, reader, judge) use it, as DESIGN.md says ("lm on nothing of ours; envs on
corpora, rewards, lm"). Agents and trainers use it from above.

Inside ``envs`` the rooms are layered the same way, lowest first: ``protocols`` (the tag
grammars), then ``tools`` (the tool-call surface beside them) and ``components`` (summarizers,
frozen models, batched model calls), ``single`` (the
single-agent env), ``team`` (the team game over it), then the package's own modules
(registration, access, the old paths) that see every room.

No module imports itself back through others: there is no import circle, counting imports
inside functions and under ``TYPE_CHECKING``.

A module may import its own layer and the layers below, at module level or inside a
function. There are no exceptions: KNOWN is empty, and an entry added there (with its
reason) must be deleted once the break is gone, or the test fails.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "searchgym"

#: The layer of each top-level part of the package (a subpackage or a module).
LAYERS = {
    "error": 0, "cache": 0, "progress": 0, "plugins": 0,
    "rewards": 1, "corpora": 1, "lm": 1,
    "envs": 2, "__init__": 2,
    "agents": 3,
    "training": 4, "methods": 4, "deepresearch": 4, "bench": 4, "cli": 4, "demo": 4, "oracle_demo": 4, "serve": 4, "serve_access": 4,
    "mcp_server": 4,
    "view": 4,
    "integrations": 5, "sb3": 5,
}
LAYER_NAMES = ["foundation", "parts", "envs", "agents", "applications", "edge"]

#: The rooms of ``searchgym.envs``, lowest first; modules directly in envs/ see them all.
ENV_ROOMS = {"protocols": 0, "tools": 1, "components": 1, "single": 2, "team": 3}
ENV_TOP = len(ENV_ROOMS)

#: Today's breaks, each with its reason. Keys:
#: ("layer", file, imported module): an import of a higher layer;
#: ("private", file, "module.name"): a private name of another module, imported or read;
#: ("unwrapped", file, expression): code outside searchgym/envs reaching through ``.unwrapped``.
KNOWN: dict[tuple[str, str, str], str] = {}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> int | None:
    """The layer of a ``searchgym`` module, None for other distributions."""
    parts = module.split(".")
    if parts[0] != "searchgym":
        return None
    part = parts[1] if len(parts) > 1 else "__init__"
    if part not in LAYERS:
        raise AssertionError(f"{module} belongs to no layer: add {part!r} to LAYERS in tests/test_layers.py.")
    return LAYERS[part]


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def env_room_of(module: str) -> int | None:
    """The room level of a ``searchgym.envs`` module (None outside envs)."""
    parts = module.split(".")
    if parts[:2] != ["searchgym", "envs"]:
        return None
    if len(parts) == 2 or f"searchgym.envs.{parts[2]}" in MODULES and not (PACKAGE / "envs" / parts[2]).is_dir():
        return ENV_TOP  # the package itself and the modules directly in envs/
    if parts[2] not in ENV_ROOMS:
        raise AssertionError(f"{module} is in no room of envs: add {parts[2]!r} to ENV_ROOMS in tests/test_layers.py.")
    return ENV_ROOMS[parts[2]]


def imports(tree: ast.AST, module: str, is_package: bool) -> list[tuple[str, list[str]]]:
    """(module imported, names taken from it) for every import statement, at any depth."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against this module's package
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[: len(package) - node.level + 1]
                base = ".".join(package + ([base] if base else []))
            names = [alias.name for alias in node.names]
            # ``from package import submodule`` imports the submodule.
            submodules = [n for n in names if f"{base}.{n}" in MODULES]
            found.extend((f"{base}.{n}", []) for n in submodules)
            rest = [n for n in names if n not in submodules]
            if rest or not submodules:
                found.append((base, rest))
    return found


def module_aliases(tree: ast.AST) -> dict[str, str]:
    """Local names bound to a searchgym module by an import (``import searchgym.lm.hf as hf``,
    ``from searchgym.lm import hf``)."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("searchgym"):
                    aliases[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("searchgym"):
            for alias in node.names:
                if f"{node.module}.{alias.name}" in MODULES:
                    aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return aliases


def dotted(node: ast.AST) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything but names and attributes."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def module_breaks(module: str, file: str, source: str) -> dict[tuple[str, str, str], str]:
    """The breaks of the three rules in one module's source: key -> what it is."""
    found: dict[tuple[str, str, str], str] = {}
    tree = ast.parse(source, filename=file)
    own = layer_of(module)
    own_room = env_room_of(module)
    for target, names in imports(tree, module, file.endswith("__init__.py")):
        layer = layer_of(target)
        if layer is not None and layer > own:
            found[("layer", file, target)] = f"{LAYER_NAMES[own]} imports {LAYER_NAMES[layer]}"
        room = env_room_of(target)
        if own_room is not None and room is not None and room > own_room:
            found[("room", file, target)] = f"envs room {module.split('.')[2]} imports a higher room"
        for name in names:
            if private(name) and target != module:
                found[("private", file, f"{target}.{name}")] = "imports a private name"
    aliases = module_aliases(tree)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        if node.attr == "unwrapped" and not module.startswith("searchgym.envs"):
            parent = parents.get(node)
            shown = parent if isinstance(parent, ast.Attribute) else node  # what is read through it
            found[("unwrapped", file, ast.unparse(shown))] = "reaches through .unwrapped"
        parts = dotted(node)
        if parts and parts[0] in aliases and private(parts[-1]):
            target = ".".join([aliases[parts[0]], *parts[1:-1]])
            if target in MODULES and target != module:
                found[("private", file, f"{target}.{parts[-1]}")] = "reads a private name"
    return found


def breaks() -> dict[tuple[str, str, str], str]:
    """Every break of the three rules in the package."""
    found: dict[tuple[str, str, str], str] = {}
    for module, path in MODULES.items():
        found.update(module_breaks(module, path.relative_to(PACKAGE.parent).as_posix(), path.read_text(encoding="utf-8")))
    return found


def test_every_module_belongs_to_a_layer():
    assert len(MODULES) > 50
    for module in MODULES:
        assert layer_of(module) is not None


def test_the_rules_catch_what_they_are_meant_to():
    source = (
        "import searchgym.lm.hf as hf\n"
        "from searchgym.training import trainer\n"
        "from searchgym.agents.driver import _describe, Task\n"
        "from searchgym.corpora.types import Passage\n"
        "from . import _private_module\n"
        "def f(env):\n"
        "    from searchgym.bench import run_bench\n"
        "    return hf._load, env.unwrapped.example, trainer.Trainer, env.unwrapped\n"
    )
    core = "searchgym/envs/single/core.py"
    assert module_breaks("searchgym.envs.single.core", core, source) == {
        ("layer", core, "searchgym.training.trainer"): "envs imports applications",
        ("layer", core, "searchgym.agents.driver"): "envs imports agents",
        ("layer", core, "searchgym.bench"): "envs imports applications",
        ("private", core, "searchgym.agents.driver._describe"): "imports a private name",
        ("private", core, "searchgym.envs.single._private_module"): "imports a private name",
        ("private", core, "searchgym.lm.hf._load"): "reads a private name",
    }
    unwrapped = module_breaks("searchgym.agents.x", "searchgym/agents/x.py", source)
    assert {key[2] for key in unwrapped if key[0] == "unwrapped"} == {"env.unwrapped.example", "env.unwrapped"}
    assert [layer_of(m) for m in ("searchgym", "searchgym.error", "searchgym.lm.base", "searchgym.integrations.trl", "numpy")] == [2, 0, 1, 5, None]
    assert private("_describe") and not private("__version__") and not private("Task")


def test_imports_point_one_way_and_no_private_name_or_unwrapped_crosses_modules():
    found = breaks()
    new = sorted(set(found) - set(KNOWN))
    gone = sorted(set(KNOWN) - set(found))
    message = []
    if new:
        message.append(
            "New breaks of the layering rules (make the name public, move the code to its layer, or use what "
            "the env exposes in info / public attributes):\n" + "\n".join(f"  {key}: {found[key]}" for key in new)
        )
    if gone:
        message.append("Fixed, so delete them from KNOWN in tests/test_layers.py:\n" + "\n".join(f"  {key}" for key in gone))
    assert not message, "\n\n".join(message)


def import_graph() -> dict[str, set[str]]:
    """Module -> the searchgym modules it imports anywhere in its source (in functions and
    under ``TYPE_CHECKING`` too)."""
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        graph[module] = {t for t, _ in imports(tree, module, path.name == "__init__.py") if t in MODULES and t != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_the_circle_finder_sees_imports_inside_functions_and_type_checking():
    a = "from searchgym.corpora.b import B\n"
    b = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from searchgym.corpora.c import C\n"
    c = "def f():\n    from searchgym.corpora.a import A\n"
    graph = {}
    for name, source in (("a", a), ("b", b), ("c", c), ("d", "import searchgym.corpora.a\n")):
        module = f"searchgym.corpora.{name}"
        targets = {t for t, _ in imports(ast.parse(source), module, False)}
        graph[module] = {t for t in targets if t.startswith("searchgym.corpora.")}
    assert circles(graph) == [["searchgym.corpora.a", "searchgym.corpora.b", "searchgym.corpora.c"]]
    graph["searchgym.corpora.c"] = set()
    assert circles(graph) == []


def test_no_import_circles():
    found = circles(import_graph())
    assert not found, "Modules that import each other (move the shared name to one side or a lower module):\n" + "\n".join(
        "  " + " <-> ".join(group) for group in found
    )


def test_envs_rooms_are_layered_and_each_has_a_docstring():
    for room in ENV_ROOMS:
        init = PACKAGE / "envs" / room / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), f"{init} needs a docstring saying what lives there."
    assert env_room_of("searchgym.envs.registration") == ENV_TOP and env_room_of("searchgym.envs") == ENV_TOP
    assert env_room_of("searchgym.envs.team.game") > env_room_of("searchgym.envs.single.game") > env_room_of("searchgym.envs.components.frozen")
    source = "from searchgym.envs.team.game import TeamGame\n"
    assert module_breaks("searchgym.envs.single.core", "searchgym/envs/single/core.py", source) == {
        ("room", "searchgym/envs/single/core.py", "searchgym.envs.team.game"): "envs room single imports a higher room",
    }
    # envs/ holds only the rooms and the modules that see them all
    flat = sorted(p.name for p in (PACKAGE / "envs").glob("*.py"))
    assert flat == ["__init__.py", "access.py", "old_paths.py", "registration.py"], flat


def test_the_env_shell_and_the_readme_stay_short():
    """SearchEnv is a shell over SearchGame (at most 250 lines, as Gymnasium's own core.py with
    its docstrings); the README keeps one line a command and sends the rest to the docs."""
    core = PACKAGE / "envs" / "single" / "core.py"
    readme = PACKAGE.parent / "README.md"
    assert len(core.read_text(encoding="utf-8").splitlines()) <= 250, f"{core} passed 250 lines: move logic into SearchGame or tasks"
    assert len(readme.read_text(encoding="utf-8").splitlines()) <= 150, "README.md passed 150 lines: move details into docs/"
