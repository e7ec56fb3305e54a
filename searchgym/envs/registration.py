"""Registered environment ids: ``gym.make("searchgym/<System>-v0", **overrides)``.

Bump the version when reward, corpus or protocol semantics change.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from gymnasium.envs.registration import register, registry
from gymnasium.error import NameNotFound

from searchgym.error import ConfigError, SearchGymError, UnknownNameError, check_name
from searchgym.plugins import import_module

NAMESPACE = "searchgym/"

ENTRY_POINT = "searchgym.envs.single.core:SearchEnv"
#: ``gym.make_vec`` of a single-agent id: the envs stepped together, their searches batched.
VECTOR_ENTRY_POINT = "searchgym.envs.single.vector:SearchVectorEnv"

#: id -> default kwargs; any of them can be overridden through ``gym.make`` kwargs.
#: Budgets follow each seed's training scripts; ``max_turns`` counts the final turn in
#: which the seeds no longer run searches.
ENV_SPECS: dict[str, dict[str, Any]] = {
    "searchgym/SearchR1-v0": {"protocol": "search_r1", "reward": "search_r1_em", "top_k": 3, "max_turns": 5},
    "searchgym/R1Searcher-v0": {"protocol": "r1_searcher", "reward": "r1_searcher_stage2", "top_k": 3, "max_turns": 9},
    # RECON (App. B.4): top-5 documents, 5 search rounds then the answer turn (the seed's
    # max_turns=5 loop plus its final rollout; Alg. 1's budget B = 5 counts the answer too,
    # max_turns=5), Alg. 1's rethink feedback (the protocol's default). The LLM summarizer
    # needs a model: the id's default condenses extractively.
    "searchgym/RECON-v0": {
        "protocol": "recon", "reward": "search_r1_em", "summarizer": "extractive", "top_k": 5, "max_turns": 6,
    },
    # s3 (Table 3's headline: 8 retrieved, 3 kept, 3 turns): 3 search turns and the final
    # one in which the searcher completes (the released 8-3-3 script's max_turns=3 loop and
    # its final rollout); App. A.1's 4 turns are max_turns=5.
    "searchgym/S3-v0": {
        "protocol": "s3", "reward": "s3_gbr", "generator": "gold-span", "top_k": 8, "initial_top_k": 3, "max_turns": 4,
    },
    "searchgym/RSearch-v0": {"protocol": "r_search", "reward": "r_search", "reader": "gold-span", "top_k": 3, "max_turns": 5},
}


#: The methods after the papers (searchgym/methods/, docs/methods.md): single-agent ids whose
#: protocol, reward or retriever is a ``module:attr`` path into searchgym.methods, built as a
#: user's own piece is (docs/extending.md): nothing here imports them.
METHOD_ENV_SPECS: dict[str, dict[str, Any]] = {
    # StepSearch (train.sh:78,80: max_turns=5, retriever.topk=3) on Search-R1's grammar, each search
    # paid as it runs: 5 search turns then the answer turn (the released loop and its final rollout).
    "searchgym/StepSearch-v0": {"protocol": "search_r1", "reward": "searchgym.methods.stepsearch:StepSearchReward", "top_k": 3, "max_turns": 6},
    # AutoRefine (docs/methods.md): top-3 documents, 5 search turns then the answer turn
    # (cmd/train.sh:29,73: max_turns=5, retriever.topk=3; the released loop and its final rollout).
    "searchgym/AutoRefine-v0": {
        "protocol": "searchgym.methods.autorefine:AutoRefineProtocol",
        "reward": "searchgym.methods.autorefine:AutoRefineReward", "top_k": 3, "max_turns": 6,
    },
    # ZeroSearch (docs/methods.md): Search-R1's game over a simulated search engine (SmolLM2 with
    # the released simulate_prompt prompts; no fine-tuned simulator is available offline), top-5
    # and 5 search turns then the answer turn (README.md:120-127: TOPK 5, MAX_TURNS 5), F1.
    "searchgym/ZeroSearch-v0": {
        "protocol": "search_r1", "reward": "searchgym.methods.zerosearch:ZeroSearchF1",
        "retriever": "searchgym.methods.zerosearch:SimulatedSearch", "top_k": 5, "max_turns": 6,
    },
    # ParallelSearch (train_parallelsearch.sh:93-95): top-3 per sub-query, 4 search turns then
    # the answer turn (the released max_turns=4 loop and its final rollout).
    "searchgym/ParallelSearch-v0": {
        "protocol": "searchgym.methods.parallelsearch:ParallelSearchProtocol",
        "reward": "searchgym.methods.parallelsearch:ParallelSearchReward", "top_k": 3, "max_turns": 5,
    },
}


#: Games after the papers' (docs/deep-research.md): single-agent ids whose pieces are ``module:attr``
#: paths into their own package, built as a user's own piece is: nothing here imports them.
GAME_ENV_SPECS: dict[str, dict[str, Any]] = {
    # The offline deep-research game: BrowseComp-Plus's tools (search with 5 hits and 512-token
    # snippets; its get_document read page by page, and find) over the generated long-document
    # world, 64 calls (searches, opens and finds) and the answer turn, a context of 128k tokens.
    "searchgym/DeepResearch-v0": {
        "protocol": "searchgym.deepresearch.protocol:DeepResearchProtocol",
        "reward": "searchgym.deepresearch.scoring:DeepResearchReward",
        "corpus": "deepwiki", "action_format": "tools", "top_k": 5, "max_turns": 65, "max_calls": 64,
        "max_context_tokens": 131072, "max_observation_chars": 65536, "max_action_chars": 16384,
    },
}


#: Single-agent views of one role of the multi-agent game (searchgym.envs.team.role_env): the
#: role trains, the other roster roles are played by ``policies`` (frozen), the frozen
#: ``generator`` answers when the generator is not in the roster and always gives the
#: searcher's naive-RAG baseline (``--frozen-model`` sets it, as for S3-v0).
ROLE_ENTRY_POINT = "searchgym.envs.team.role_env:RoleEnv"
#: The roster is the trained role, the searcher and every role with a policy.
ROLE_ENV_SPECS: dict[str, dict[str, Any]] = {
    "searchgym/MultiAgentSearcher-v0": {"role": "searcher", "generator": "gold-span"},
    "searchgym/MultiAgentSummarizer-v0": {"role": "summarizer", "policies": {"searcher": "complete"}, "generator": "gold-span"},
    "searchgym/MultiAgentGenerator-v0": {"role": "generator", "policies": {"searcher": "complete"}, "generator": "gold-span"},
}

#: PettingZoo environments: ``metadata["name"]`` -> the module exposing ``env()``,
#: ``raw_env()`` and ``parallel_env()`` (PettingZoo's convention; it has no registry).
MULTI_AGENT_ENVS: dict[str, str] = {"search_team_v0": "searchgym.envs.team.multi_agent"}


def register_envs() -> None:
    """Register every id of :data:`ENV_SPECS` and :data:`ROLE_ENV_SPECS` once (importing
    searchgym does it)."""
    for specs, entry_point, vector in (
        (ENV_SPECS, ENTRY_POINT, VECTOR_ENTRY_POINT), (METHOD_ENV_SPECS, ENTRY_POINT, VECTOR_ENTRY_POINT),
        (GAME_ENV_SPECS, ENTRY_POINT, VECTOR_ENTRY_POINT),
        (ROLE_ENV_SPECS, ROLE_ENTRY_POINT, None),
    ):
        for env_id, kwargs in specs.items():
            if env_id not in registry:
                register(id=env_id, entry_point=entry_point, vector_entry_point=vector, kwargs=dict(kwargs), disable_env_checker=False)
            # The id without its namespace makes no env: it says to add "searchgym/" (Gymnasium's own
            # NameNotFound cannot be told more). An id another package registered is left alone.
            bare = env_id.removeprefix(NAMESPACE)
            if bare not in registry:
                register(id=bare, entry_point=functools.partial(_without_namespace, bare), disable_env_checker=True)


class NamespaceMissingError(SearchGymError, NameNotFound):
    """``gym.make("SearchR1-v0")``: a searchgym id without its ``searchgym/`` namespace. A
    Gymnasium ``NameNotFound`` too, so code that catches that still does."""


def _without_namespace(bare: str, **kwargs: Any) -> Any:
    """The entry point of a bare id (see :func:`register_envs`): no env, the id to use."""
    raise NamespaceMissingError(
        f"{bare!r} is not an env id: searchgym's ids carry the namespace searchgym/; "
        f"use gym.make({NAMESPACE + bare!r}) (the CLI's --env and --run take {bare!r} as it is)."
    )


def full_env_id(env_id: str) -> str:
    """``"SearchR1-v0"`` or ``"searchgym/SearchR1-v0"`` -> the registered id; an unknown one
    raises with the valid names.

    A user's own env is taken too: an id a module registered with Gymnasium's ``register``
    (imported first by ``--import``), or Gymnasium's ``"module:Env-v0"`` form, whose module is
    imported now (a failing import is a :class:`ConfigError` quoting its error) and must
    register ``Env-v0``; that form is returned as it is, so other processes import it too.
    """
    if isinstance(env_id, str) and ":" in env_id:
        module, _, name = env_id.partition(":")
        import_module(module, what=f"env id {env_id!r}")
        if name not in registry or _is_bare(registry[name].entry_point):
            raise ConfigError(
                f"The env id {env_id!r} expects module {module!r} to register {name!r} with gymnasium.register when "
                f"imported, but it did not; ids it registers: {', '.join(user_env_ids()) or 'none'}."
            )
        return env_id
    name = env_id if env_id.startswith(NAMESPACE) else NAMESPACE + env_id
    if name not in ENV_SPECS and name not in METHOD_ENV_SPECS and name not in GAME_ENV_SPECS and name not in ROLE_ENV_SPECS:
        if env_id in user_env_ids():
            return env_id
        known = (*ENV_SPECS, *METHOD_ENV_SPECS, *GAME_ENV_SPECS, *ROLE_ENV_SPECS)
        raise UnknownNameError("env id", env_id, [e.removeprefix(NAMESPACE) for e in known])
    return name


def user_env_ids() -> list[str]:
    """Ids registered with Gymnasium by a user's module (not searchgym's, not Gymnasium's own envs)."""
    ids = []
    for env_id, spec in registry.items():
        entry = spec.entry_point if isinstance(spec.entry_point, str) else getattr(spec.entry_point, "__module__", "")
        if env_id.startswith(NAMESPACE) or str(entry).startswith(("gymnasium.", "shimmy.", "ale_py")) or _is_bare(spec.entry_point):
            continue
        ids.append(env_id)
    return sorted(ids)


def _is_bare(entry_point: Any) -> bool:
    """Whether ``entry_point`` is that of a bare searchgym id (:func:`register_envs`)."""
    return isinstance(entry_point, functools.partial) and entry_point.func is _without_namespace


def env_spec(env_id: str) -> dict[str, Any]:
    """The default ``gym.make`` arguments of a registered id (full or short; a user's id: the
    kwargs it was registered with)."""
    name = full_env_id(env_id)
    for specs in (ENV_SPECS, METHOD_ENV_SPECS, GAME_ENV_SPECS, ROLE_ENV_SPECS):
        if name in specs:
            return dict(specs[name])
    return dict(registry[name.partition(":")[2] if ":" in name else name].kwargs)


def own_retriever(env_id: str, options: Mapping[str, Any]) -> Any:
    """A retriever of its own for one env (``retriever_per_env``): built anew from the env's
    ``retriever`` spec, never the process's shared one. An engine given as an object cannot
    be copied: name it (a registered name or ``module:attr``) instead."""
    from searchgym.corpora import load_corpus, make_retriever

    spec = {**env_spec(env_id), **options}
    name = spec.get("retriever", "bm25")
    if not isinstance(name, str):
        raise ConfigError(
            f"retriever_per_env builds a retriever for each env and expects the env's retriever as a name or module:attr, "
            f"got a {type(name).__name__} object; name its class or factory as module:attr (or register_retriever it)."
        )
    corpus = load_corpus(spec.get("corpus", "synthwiki"), **dict(spec.get("corpus_options") or {}))
    return make_retriever(name, corpus, cache=False, **dict(spec.get("retriever_options") or {}))


def with_frozen_models(env_id: str, kwargs: Mapping[str, Any], *, frozen: Any = None, summarizer: str | None = None, summarizer_model: Any = None) -> dict[str, Any]:
    """``gym.make`` arguments of ``env_id`` with its frozen components filled in, unless
    ``kwargs`` sets them already: ``frozen`` as the generator (s3) or reader (R-Search),
    and ``summarizer`` (with ``summarizer_model`` as the model of the ``"llm"`` one)."""
    spec = env_spec(env_id)
    out = dict(kwargs)
    if frozen is not None:
        for role in ("generator", "reader"):
            if role in spec:
                out.setdefault(role, frozen)
    if summarizer is not None and "summarizer" not in out:
        out["summarizer"] = summarizer
        if summarizer == "llm":
            if summarizer_model is None:
                raise ConfigError("summarizer='llm' needs a frozen model to summarize with; name one (e.g. 'smollm2').")
            out.setdefault("summarizer_options", {"model": summarizer_model})
    return out


def make_multi_agent(name: str, *, parallel: bool = False, **options: Any) -> Any:
    """The PettingZoo env registered as ``name`` in :data:`MULTI_AGENT_ENVS`: its AEC form
    (``env()``, order-enforcing wrapper included) or with ``parallel=True`` its parallel form."""
    import importlib

    check_name("multi-agent env", name, MULTI_AGENT_ENVS)
    module = importlib.import_module(MULTI_AGENT_ENVS[name])
    return module.parallel_env(**options) if parallel else module.env(**options)
