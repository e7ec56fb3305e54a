"""Agents by name, for the benchmark harness and the command line.

A name is one of the built-in agents of :data:`AGENTS`, a name given to
:func:`register_agent` in this process, a name an installed package declares in the
``searchgym.agents`` entry-point group, or ``module:factory`` (a factory importable from
the current directory or an installed package, loaded on first use).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from searchgym.agents.base import Agent
from searchgym.envs.access import search_env
from searchgym.error import ConfigError, UnknownNameError
from searchgym.plugins import load_object

#: Agent name -> what it is. ``lm`` picks the family that plays the env's protocol.
AGENTS: dict[str, str] = {
    "lm": "the policy LM playing the env's protocol (end-to-end, s3 searcher or R-Search evidence agent)",
    "no-retrieval": "the LM answers from memory in one turn",
    "naive-rag": "top-k of the env's retriever for the question, then the LM answers",
    "naive-rag-dense": "top-k of the dense retriever (MiniLM + faiss) for the question, then the LM answers",
    "gold-passage": "the LM reads the question's gold passages, then answers: the reader's upper bound (wiki-vital, synthwiki)",
    "oracle": "scripted solver that reads each question's solution: synthwiki's path, wiki-vital's source article; "
    "a game's own where its protocol names one (deep research: the evidence labels) (LM-free)",
    "random": "uniformly random well-formed actions; a game's own where its protocol names one (LM-free)",
    "sb3": "a Stable-Baselines3 template policy (option policy=RUN of `searchgym train --algorithm sb3-ppo`); the LM reads its passages",
    "chat-tools": "a chat model playing through its own function calling over chat completions (--backend openai; "
    "its env is made with action_format='tools')",
}

#: Built-in agents that live at the edge of the package, by ``module:factory`` (as Gymnasium
#: registers env entry points): loaded on first use, so this layer imports none of them.
ENTRY_POINTS: dict[str, str] = {"sb3": "searchgym.sb3.agent:SB3Agent.for_env"}

#: Agents that need no language model.
LM_FREE = frozenset({"oracle", "random"})

#: Built-in agents that play native tool calls (their env is made with ``action_format="tools"``).
TOOL_AGENTS = frozenset({"chat-tools"})

#: Built-in agents that need a chat-completions model (an OpenAILM: ``backend="openai"``).
CHAT_AGENTS = frozenset({"chat-tools"})

_BUILT_IN = frozenset(AGENTS)

#: Entry-point group in which installed packages declare agents (``name = "module:factory"``).
ENTRY_POINT_GROUP = "searchgym.agents"

#: Options a benchmark passes to a user's factory that takes a parameter of that name.
BENCH_OPTIONS = ("seed", "temperature", "max_new_tokens")

_FACTORIES: dict[str, Callable[..., Agent]] = {}
_NEEDS_LM: dict[str, bool] = {}
_ENTRY_POINTS_LOADED = False


def register_agent(name: str, factory: Callable[..., Agent], *, description: str | None = None, needs_lm: bool | None = None) -> None:
    """Make ``factory`` available under ``name`` to :func:`make_agent`, ``BenchConfig``
    runs and ``searchgym bench --agents`` (in this process).

    Args:
        name: The agent's name (not a built-in's; registering a name again replaces it).
        factory: An :class:`Agent` subclass or a function returning an ``Agent``. It is
            called with ``env=`` if it takes a parameter named ``env``, ``lm=`` (the
            policy model) if it takes one named ``lm``, the benchmark's ``seed``,
            ``temperature`` and ``max_new_tokens`` if it takes parameters of those names,
            and the run's ``agent_options`` as keywords.
        description: One line for ``searchgym bench --help`` (default: the first line of
            the factory's docstring).
        needs_lm: Whether the agent needs the policy model (default: whether ``factory``
            has a parameter ``lm`` without a default value).
    """
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ConfigError(f"register_agent expects a non-empty name without surrounding spaces, got {name!r}.")
    if name in _BUILT_IN:
        raise ConfigError(f"register_agent: {name!r} is a built-in agent; give yours another name.")
    if not callable(factory) or isinstance(factory, Agent):
        raise ConfigError(
            f"register_agent expects a factory (an Agent subclass or a function returning an Agent), got "
            f"{type(factory).__name__}. To benchmark an agent instance, put it in BenchConfig.runs directly."
        )
    _FACTORIES[name] = factory
    _NEEDS_LM[name] = factory_needs_lm(factory) if needs_lm is None else bool(needs_lm)
    AGENTS[name] = description or _first_line(factory) or f"user agent {describe_agent(factory)}"


def unregister_agent(name: str) -> None:
    """Forget an agent given to :func:`register_agent`."""
    if name in _BUILT_IN or name not in _FACTORIES:
        raise ConfigError(f"unregister_agent: {name!r} is not a registered user agent (registered: {', '.join(_FACTORIES) or 'none'}).")
    del _FACTORIES[name], _NEEDS_LM[name], AGENTS[name]


def registered_factory(name: str) -> Callable[..., Agent] | None:
    """The factory registered under ``name`` (None for built-ins and unknown names)."""
    return _FACTORIES.get(name)


def check_agent(name: str) -> str:
    """``name`` if it names an agent (loading ``module:factory`` names and entry points on
    first use); otherwise an :class:`~searchgym.error.UnknownNameError` or a
    :class:`~searchgym.error.ConfigError` saying what failed to load."""
    if not isinstance(name, str):
        raise ConfigError(f"An agent name must be a str, got {type(name).__name__}.")
    if name in AGENTS:
        return name
    _load_entry_points()
    if name in AGENTS:
        return name
    if ":" in name:
        register_agent(name, load_factory(name))
        return name
    raise UnknownNameError("agent", name, list(AGENTS) + ["module:factory"])


def load_factory(spec: str) -> Callable[..., Agent]:
    """The object ``module:attribute`` names (``attribute`` may be dotted), importing
    ``module`` with the current directory on the path (:func:`searchgym.plugins.load_object`);
    it must be an Agent factory."""
    obj: Any = load_object(spec, what="agent")  # the one importer of user pieces (searchgym.plugins)
    if isinstance(obj, Agent) or not callable(obj):
        raise ConfigError(
            f"Agent {spec!r} must name an Agent subclass or a function returning an Agent, got {type(obj).__name__}."
        )
    return obj


def _load_entry_points() -> None:
    global _ENTRY_POINTS_LOADED
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED = True
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in AGENTS:
            continue  # a built-in or in-process registration wins
        try:
            factory = ep.load()
        except Exception as e:  # a broken plugin must not break the other agents
            AGENTS[ep.name] = f"(failed to load {ep.value}: {type(e).__name__}: {e})"
            _FACTORIES[ep.name] = _broken(ep.name, ep.value, e)
            _NEEDS_LM[ep.name] = False
            continue
        register_agent(ep.name, factory)


def _broken(name: str, value: str, error: Exception) -> Callable[..., Agent]:
    def factory(**_: Any) -> Agent:
        raise ConfigError(f"The agent {name!r} declared as {value!r} failed to load: {type(error).__name__}: {error}")

    return factory


def factory_needs_lm(factory: Callable[..., Any]) -> bool:
    """Whether ``factory`` has a parameter ``lm`` without a default value."""
    parameter = _parameters(factory).get("lm")
    return parameter is not None and parameter.default is inspect.Parameter.empty


def build_agent(factory: Callable[..., Any], env: Any, lm: Any = None, options: dict[str, Any] | None = None, bench: dict[str, Any] | None = None) -> Agent:
    """Call a user's agent factory (see :func:`register_agent` for what it is passed)."""
    parameters = _parameters(factory)
    kwargs = {k: v for k, v in (bench or {}).items() if k in parameters}
    if "env" in parameters:
        kwargs["env"] = env
    if "lm" in parameters and lm is not None:
        kwargs["lm"] = lm
    kwargs.update(options or {})
    name = describe_agent(factory)
    try:
        agent = factory(**kwargs)
    except TypeError as e:
        if "argument" not in str(e):
            raise
        raise ConfigError(
            f"The agent factory {name} could not be called with {sorted(kwargs)} ({e}). A factory is called with env=, "
            "lm=, seed=, temperature=, max_new_tokens= where it takes parameters of those names, and its agent options."
        ) from None
    if not isinstance(agent, Agent):
        raise ConfigError(f"The agent factory {name} returned {type(agent).__name__}; it must return a searchgym.agents.Agent.")
    return agent


def describe_agent(agent: Any) -> str:
    """How a run's agent is recorded: a name as is, a factory as ``module:qualname``, an
    instance as ``module:Class()`` (the same text in every process, so a benchmark resumes)."""
    if isinstance(agent, str):
        return agent
    if isinstance(agent, Agent):
        return f"{type(agent).__module__}:{type(agent).__qualname__}()"
    return f"{getattr(agent, '__module__', '?')}:{getattr(agent, '__qualname__', type(agent).__qualname__)}"


def agent_label(agent: Any) -> str:
    """A short name for a run's agent: its name, or an agent's or factory's ``name``
    attribute, or the factory's ``__name__``."""
    if isinstance(agent, str):
        return agent
    name = getattr(agent, "name", None)
    if isinstance(name, str) and name != Agent.name:
        return name
    return type(agent).__name__ if isinstance(agent, Agent) else getattr(agent, "__name__", type(agent).__name__)


def _parameters(factory: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(factory).parameters)
    except (TypeError, ValueError):
        return {}


def _first_line(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    if isinstance(obj, type) and doc == inspect.getdoc(Agent):
        return ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def agent_action_format(agent: Any) -> str:
    """The env ``action_format`` that ``agent`` plays (a name, an Agent instance or a factory):
    ``"tools"`` for the built-in tool agents (:data:`TOOL_AGENTS`), else the ``action_format``
    attribute of the agent or its factory (an Agent subclass has :attr:`Agent.action_format`;
    a function may carry one), ``"tags"`` by default."""
    if isinstance(agent, str):
        if agent in TOOL_AGENTS:
            return "tools"
        check_agent(agent)
        agent = _FACTORIES.get(agent)
    value = getattr(agent, "action_format", "tags")
    if value not in ("tags", "tools"):
        raise ConfigError(f"The agent {describe_agent(agent)} declares action_format={value!r}; expected 'tags' or 'tools'.")
    return value


def needs_lm(name: str, env: Any = None, options: dict[str, Any] | None = None) -> bool:
    """Whether agent ``name`` needs a language model (the sb3 agent does only to answer,
    i.e. not in the s3 protocol and not with a ``generator`` option)."""
    if name in _NEEDS_LM:
        return _NEEDS_LM[name]
    if name in LM_FREE:
        return False
    if name == "sb3":
        if "generator" in (options or {}):
            return False
        if env is not None:
            from searchgym.envs.registration import env_spec

            protocol = (env_spec(env) if isinstance(env, str) else {"protocol": search_env(env).protocol.name}).get("protocol")
            return protocol != "s3"
    return True


def make_agent(name: str, env: Any, *, lm: Any = None, **options: Any) -> Agent:
    """The agent called ``name`` for ``env`` (wrapped or not); ``lm`` is a LanguageModel
    for the agents that need one. ``options`` go to the agent's constructor (sampling
    settings for LM agents, ``seed`` for the random agent, ``k`` for naive RAG,
    ``retriever_options`` for the dense index of ``naive-rag-dense``, ``policy`` for sb3;
    a registered agent's factory gets them as keywords, see :func:`register_agent`)."""
    check_agent(name)
    if needs_lm(name, env, options) and lm is None:
        raise ConfigError(f"The {name!r} agent needs a language model, got lm=None. Pass lm=load_lm('smollm2') or similar.")
    if name in _FACTORIES:
        return build_agent(_FACTORIES[name], env, lm, options)
    try:
        return _make(name, env, lm, options)
    except TypeError as e:
        if "unexpected keyword argument" not in str(e):
            raise
        raise ConfigError(f"The {name!r} agent does not take that option ({e}); see make_agent's docstring or `searchgym bench --help`.") from None


def scripted_agent(env: Any, name: str) -> str | None:
    """The ``module:factory`` that plays the LM-free agent ``name`` (``oracle``, ``random``) on
    ``env``'s game when its protocol names one of its own (``Protocol.scripted_agents``, e.g.
    the deep-research game's oracle reads its evidence labels); None: the built-in one plays."""
    own = getattr(search_env(env).protocol, "scripted_agents", None) or {}
    spec = own.get(name) if isinstance(own, dict) else None
    if spec is not None and not (isinstance(spec, str) and ":" in spec):
        raise ConfigError(
            f"The protocol {type(search_env(env).protocol).__name__} names its {name!r} agent as {spec!r}; "
            "scripted_agents maps an agent name to a 'module:factory' string."
        )
    return spec


def _make(name: str, env: Any, lm: Any, options: dict[str, Any]) -> Agent:
    if name in LM_FREE:
        own = scripted_agent(env, name)
        if own is not None:  # the game's own oracle or random agent, loaded by path: this layer imports none
            return build_agent(load_factory(own), env, None, options)
    if name == "oracle":
        from searchgym.agents.oracle import SynthWikiOracle

        if options:
            raise ConfigError(f"The 'oracle' agent takes no options, got {sorted(options)}.")
        return SynthWikiOracle.for_env(env)
    if name == "random":
        from searchgym.agents.baselines import RandomAgent

        return RandomAgent.for_env(env, **options)
    if name in ENTRY_POINTS:
        return load_factory(ENTRY_POINTS[name])(env, lm=lm, **options)
    if name == "chat-tools":
        from searchgym.agents.chat_tools import ChatToolAgent

        return ChatToolAgent.for_env(env, lm, **options)
    if name == "lm":
        from searchgym.agents.lm_agents import policy_agent

        return policy_agent(env, lm, **options)
    from searchgym.agents.baselines import GoldPassageAgent, NaiveRAGAgent, NoRetrievalAgent

    if name == "no-retrieval":
        return NoRetrievalAgent.for_env(env, lm, **options)
    if name == "gold-passage":
        return GoldPassageAgent.for_env(env, lm, **options)
    if name == "naive-rag-dense":
        from searchgym.corpora.retrievers import make_retriever

        # retriever_options (e.g. {"dtype": "bfloat16"}) configure the dense index.
        options["retriever"] = make_retriever("dense", search_env(env).corpus, **options.pop("retriever_options", {}))
    return NaiveRAGAgent.for_env(env, lm, **options)
