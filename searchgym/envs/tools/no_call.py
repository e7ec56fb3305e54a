"""A tool turn without a call that writes a tag grammar instead: said, never silent.

In a tools env a reply with no call is the final answer (the games where the agent answers)
or a bad turn (s3). A model prompted or trained for a tag grammar writes ``<search> q
</search>`` there, which then ends its episode at turn 1 as an answer. The env counts such
endings (``info["ended_without_call"]``); this module finds the tags of a grammar in the
reply's text, so the env can name them (``info["tags_without_call"]``, the feedback of s3's
bad turn) and warn once per process.

The tags are those the registered protocols stop at (:attr:`Protocol.stop_strings
<searchgym.envs.protocols.base.Protocol.stop_strings>`: ``</search>``, ``</answer>``,
``<|end_of_query|>``, ``</query>``, and a user's protocol's), with their opening forms.
"""

from __future__ import annotations

import warnings

#: Whether this process has warned of a reply without a call that wrote a grammar's tags.
_warned = False


def _opening(tag: str) -> str | None:
    """The opening form of a closing tag: ``<search>`` of ``</search>``,
    ``<|begin_of_query|>`` of ``<|end_of_query|>``; None for another shape."""
    if tag.startswith("</") and tag.endswith(">"):
        return "<" + tag[2:]
    if tag.startswith("<|end_of_") and tag.endswith("|>"):
        return "<|begin_of_" + tag[len("<|end_of_"):]
    return None


def grammar_tags() -> tuple[str, ...]:
    """The tags of every registered protocol's grammar, opening and closing (read when
    called, so a protocol a user module registers counts)."""
    from searchgym.envs.protocols import PROTOCOLS

    tags: dict[str, None] = {}
    for protocol in PROTOCOLS.values():
        for stop in getattr(protocol, "stop_strings", ()):
            if isinstance(stop, str) and stop.strip():
                opening = _opening(stop.strip())
                for tag in (opening, stop.strip()):
                    if tag:
                        tags[tag] = None
    return tuple(tags)


def tags_in(text: str) -> tuple[str, ...]:
    """The grammar tags (:func:`grammar_tags`) that ``text`` writes, in the order they first
    appear, each once."""
    if "<" not in text:
        return ()
    found = sorted((text.find(tag), tag) for tag in grammar_tags() if tag in text)
    return tuple(tag for _, tag in found)


def warn_once(tags: tuple[str, ...], *, ended: bool) -> None:
    """One warning per process that a tools env got a reply with no call in a tag grammar:
    the model writes the wrong format, which the env reads as an answer (``ended``) or a bad
    turn, and no score says so."""
    global _warned
    if _warned or not tags:
        return
    _warned = True
    read = "its final answer, ending the episode" if ended else "a bad turn"
    warnings.warn(
        f"A tools env (action_format='tools') got a reply with no tool call that writes a tag grammar's tags "
        f"({', '.join(tags)}) and read it as {read}: the model writes tags where this env reads tool calls. "
        "Play it through its chat template's tools, or make the env with action_format='tags'. "
        "Counted in info['ended_without_call'] and info['tags_without_call'] (searchgym bench prints the counts); "
        "this warning is shown once per process.",
        UserWarning,
        stacklevel=3,
    )


__all__ = ["grammar_tags", "tags_in", "warn_once"]
