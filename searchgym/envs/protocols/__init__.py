"""One protocol (tag grammar, prompt, rendering) per system (Search-R1, s3, R1-Searcher, R-Search, RECON)."""

from __future__ import annotations

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
from searchgym.error import UnknownNameError

PROTOCOLS: dict[str, type[Protocol]] = {
    "search_r1": SearchR1Protocol,
    "r1_searcher": R1SearcherProtocol,
    "recon": ReconProtocol,
    "s3": S3Protocol,
    "r_search": RSearchProtocol,
}


def make_protocol(spec: str | Protocol) -> Protocol:
    """A protocol from its name in :data:`PROTOCOLS` or an instance."""
    if isinstance(spec, Protocol):
        return spec
    if not isinstance(spec, str) or spec not in PROTOCOLS:
        raise UnknownNameError("protocol", spec, PROTOCOLS)
    return PROTOCOLS[spec]()


__all__ = [
    "PROTOCOLS", "Action", "Answer", "Complete", "Evidence", "Invalid", "ParsedTurn",
    "Protocol", "Search", "Select", "make_protocol",
]
