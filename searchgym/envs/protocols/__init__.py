"""One protocol (tag grammar, prompt, rendering) per system (Search-R1, s3, R1-Searcher, R-Search, RECON)."""

from __future__ import annotations

import inspect
from typing import Any

from searchgym.envs.protocols.base import (
    Action,
    Answer,
    Complete,
    Evidence,
    Invalid,
    ParsedTurn,
    Protocol,
    Search,
    Select,
)
from searchgym.envs.protocols.r1_searcher import R1SearcherProtocol
from searchgym.envs.protocols.r_search import RSearchProtocol
from searchgym.envs.protocols.s3 import S3Protocol
from searchgym.envs.protocols.search_r1 import ReconProtocol, SearchR1Protocol
from searchgym.error import ConfigError, UnknownNameError

PROTOCOLS: dict[str, type[Protocol]] = {
    "search_r1": SearchR1Protocol,
    "r1_searcher": R1SearcherProtocol,
    "recon": ReconProtocol,
    "s3": S3Protocol,
    "r_search": RSearchProtocol,
}


def make_protocol(spec: str | Protocol, **options: Any) -> Protocol:
    """A protocol from its name in :data:`PROTOCOLS` (built with ``options``, e.g. s3's
    ``docs_per_window``) or an instance."""
    if isinstance(spec, Protocol):
        if options:
            raise ConfigError(
                f"make_protocol got a protocol object and also options {sorted(options)}; pass the options to "
                "its constructor instead."
            )
        return spec
    if not isinstance(spec, str) or spec not in PROTOCOLS:
        raise UnknownNameError("protocol", spec, PROTOCOLS)
    cls = PROTOCOLS[spec]
    accepted = [p for p in inspect.signature(cls.__init__).parameters if p not in ("self", "args", "kwargs")]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(
            f"Protocol {spec!r} does not take {', '.join(map(repr, unknown))}; expected options among: "
            f"{', '.join(accepted) or 'none'}."
        )
    return cls(**options)


__all__ = [
    "PROTOCOLS", "Action", "Answer", "Complete", "Evidence", "Invalid", "ParsedTurn",
    "Protocol", "Search", "Select", "make_protocol",
]
