"""Who may use a ``searchgym serve``: a token, sent as a header or as the URL's first path
segment, and an allow-list of client networks.

Search-R1's rollout client knows only a URL (``retriever.url``) and sends no header, so a
server on another machine lets it in by one of two means, each with its risk:

- **The token in the URL**: the client is configured with ``http://HOST:PORT/TOKEN/retrieve``.
  The token then travels wherever that URL does: the trainer's printed and logged config
  (Hydra, wandb), process lists, shell history, and the logs of any proxy between them. It
  crosses the network in clear text, as the header does (HTTP, no TLS).
- **An allow-list** (``--allow 10.0.0.0/8``): requests from those addresses are let in with
  no token. It trusts the network: anyone who can send from a listed address (another user
  of a shared node, a host on the same subnet, anything behind a listed NAT or proxy) gets in.

``Authorization: Bearer TOKEN`` stays the header form for clients that can send one. All are
checked before a request's body is read.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from searchgym.error import ConfigError

__all__ = ["ENDPOINTS", "Access", "PathToken", "parse_networks"]

#: The endpoints a ``/TOKEN/...`` path may name.
ENDPOINTS = ("retrieve", "health", "info")

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(specs: Iterable[str]) -> tuple[Network, ...]:
    """``--allow`` values (an address or a CIDR network, e.g. ``10.0.0.0/8``) as networks,
    or :class:`ConfigError` naming the bad one."""
    networks = []
    for spec in specs:
        try:
            networks.append(ipaddress.ip_network(str(spec).strip(), strict=False))
        except ValueError:
            raise ConfigError(
                f"--allow expects an IP address or a CIDR network such as 10.0.0.0/8 or 192.168.1.7, got {spec!r}."
            ) from None
    return tuple(networks)


def client_address(host: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The peer's address (an IPv4 address mapped into IPv6 read as IPv4), None when unknown."""
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@dataclass(frozen=True)
class Access:
    """A server's admission rule: open (neither set), a token, an allow-list, or both (a
    listed address gets in without the token, others need it)."""

    token: str | None = None
    allow: tuple[Network, ...] = ()

    def __post_init__(self) -> None:
        if self.token is not None and (not isinstance(self.token, str) or not self.token):
            raise ConfigError(f"searchgym serve expects --token to be a non-empty string, got {self.token!r}.")

    @property
    def guarded(self) -> bool:
        """Whether anything is required of a client (a non-loopback host needs it)."""
        return bool(self.token or self.allow)

    def allowed_address(self, host: str | None) -> bool:
        address = client_address(host)
        return address is not None and any(address.version == n.version and address in n for n in self.allow)

    def token_matches(self, given: str | bytes) -> bool:
        if not self.token:
            return False
        given = given.encode("utf-8", "surrogateescape") if isinstance(given, str) else given
        return hmac.compare_digest(given, self.token.encode("utf-8", "surrogateescape"))

    def refusal(self, authorization: str, client: str | None, *, path_token: bool = False) -> tuple[int, str] | None:
        """``(status, message)`` for a request that may not pass, None for one that may."""
        if not self.guarded or path_token or self.allowed_address(client):
            return None
        if self.token and self.token_matches(authorization.removeprefix("Bearer ") if authorization.startswith("Bearer ") else ""):
            return None
        if self.token:
            return 401, ("missing or wrong bearer token: send 'Authorization: Bearer TOKEN' (the server's --token), or put "
                         "the token first in the URL's path: http://HOST:PORT/TOKEN/retrieve")
        return 403, f"client address {client} is not in the server's --allow list"

    def describe(self) -> str:
        """What the start line says about access."""
        parts = ["token required (header or URL path)"] if self.token else ["no token"]
        if self.allow:
            parts.append("allow " + " ".join(str(n) for n in self.allow))
        return "; ".join(parts)


class PathToken:
    """ASGI wrapper: ``/TOKEN/retrieve`` (``/TOKEN/health``, ``/TOKEN/info``) is served as
    ``/retrieve`` with the token taken as given; ``/OTHER/retrieve`` gets a 401 at once,
    without echoing the segment (it may be someone's mistyped token). Other paths pass on.
    The app reads ``scope["searchgym.path_token"]``."""

    def __init__(self, app: Any, access: Access):
        self.app, self.access = app, access

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.access.token:
            parts = scope["path"].split("/")
            if len(parts) == 3 and parts[0] == "" and parts[1] and parts[2] in ENDPOINTS:
                if not self.access.token_matches(parts[1]):
                    await self._refuse(send, scope["method"], parts[2])
                    return
                path = "/" + parts[2]
                scope = {**scope, "path": path, "raw_path": path.encode(), "searchgym.path_token": True}
        await self.app(scope, receive, send)

    @staticmethod
    async def _refuse(send: Any, method: str, endpoint: str) -> None:
        message = (f"wrong token in the URL's path ({method} /TOKEN/{endpoint}): the first path segment must be the "
                   "server's --token")
        body = json.dumps({"error": message, "status": 401}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})
