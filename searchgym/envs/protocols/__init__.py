"""One protocol (tag grammar, prompt, rendering) per system (Search-R1, s3, R1-Searcher, R-Search, RECON)."""

from __future__ import annotations

import inspect
from typing import Any

from searchgym.envs.protocols.base import (
    BUILT_IN_KINDS,
    Action,
    OPTIONAL,
    REQUIRED,
    Answer,
    Complete,
    Evidence,
    Invalid,
    ParsedTurn,
    Protocol,
    Search,
    Select,
    accepts_keyword,
    check_protocol_class,
    cut_at_stop,
    find_block,
    find_blocks,
    first_of,
    is_action,
    play_action,
    render_turn,
    search_or_answer,
    strip_blocks,
)
from searchgym.envs.protocols.r1_searcher import R1SearcherProtocol
from searchgym.envs.protocols.r_search import RSearchProtocol
from searchgym.envs.protocols.s3 import S3Protocol
from searchgym.envs.protocols.search_r1 import ReconProtocol, SearchR1Protocol
from searchgym.envs.protocols.tool_spec import ARGUMENT_TYPES, ToolSpec
from searchgym.error import ConfigError, UnknownNameError
from searchgym.plugins import piece_source

PROTOCOLS: dict[str, type[Protocol]] = {
    "search_r1": SearchR1Protocol,
    "r1_searcher": R1SearcherProtocol,
    "recon": ReconProtocol,
    "s3": S3Protocol,
    "r_search": RSearchProtocol,
}


def protocol_source(spec: Any) -> Any:
    """What a protocol spec names, checked without building it: the class of a name in
    :data:`PROTOCOLS` (a user module may add its own), the object ``"module:attr"`` names
    (a :class:`Protocol` subclass, an instance, or a factory returning one), or ``spec``
    itself if it is a protocol. Entry points call it before any model loads."""
    source = piece_source(spec, base=Protocol, registry=PROTOCOLS, what="protocol", noun="protocol", kind="protocol")
    if isinstance(source, type):  # a class that leaves out a required method is refused by name, before it is built
        check_protocol_class(source, spec if isinstance(spec, str) else None)
    return source


def make_protocol(spec: Any, **options: Any) -> Protocol:
    """A protocol from its name in :data:`PROTOCOLS` (built with ``options``, e.g. s3's
    ``docs_per_window``), ``"module:attr"`` naming a :class:`Protocol` subclass or a factory
    (called with ``options``), or an instance (returned as it is)."""
    source = protocol_source(spec)
    if isinstance(source, Protocol):
        if options:
            raise ConfigError(
                f"make_protocol got a protocol object and also options {sorted(options)}; pass the options to "
                "its constructor instead."
            )
        return source
    label = spec if isinstance(spec, str) else getattr(source, "__name__", type(source).__name__)
    try:
        parameters = inspect.signature(source.__init__ if isinstance(source, type) else source).parameters
    except (TypeError, ValueError):
        parameters = {}
    accepted = [p for p, v in parameters.items() if p not in ("self", "args", "kwargs") and v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD)]
    # A class is held to its named parameters (as the built-ins are); a factory taking **options checks them itself.
    open_ended = not parameters or not isinstance(source, type) and any(v.kind is v.VAR_KEYWORD for v in parameters.values())
    unknown = [] if open_ended else sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(
            f"Protocol {label!r} does not take {', '.join(map(repr, unknown))}; expected options among: "
            f"{', '.join(accepted) or 'none'}."
        )
    protocol = source(**options)
    if not isinstance(protocol, Protocol):
        raise ConfigError(f"Protocol {label!r} expects its factory to return a Protocol, got {type(protocol).__name__}.")
    return protocol


__all__ = [
    "PROTOCOLS", "Action", "Answer", "Complete", "Evidence", "Invalid", "ParsedTurn",
    "Protocol", "Search", "Select", "make_protocol", "protocol_source",
    # the protocol contract: what a subclass must define (REQUIRED) and may override (OPTIONAL)
    "OPTIONAL", "REQUIRED", "check_protocol_class",
    # writing a protocol of your own: action kinds, tools and the tag helpers the built-in grammars use
    "ARGUMENT_TYPES", "BUILT_IN_KINDS", "ToolSpec", "accepts_keyword", "cut_at_stop", "find_block", "find_blocks",
    "first_of", "is_action", "play_action", "render_turn", "search_or_answer", "strip_blocks",
    "R1SearcherProtocol", "RSearchProtocol", "ReconProtocol", "S3Protocol", "SearchR1Protocol",
]
