"""What an episode looked like, turn by turn, kept with its result for people to read.

An episode record (:class:`~searchgym.agents.driver.EpisodeResult`) holds scores and counts;
``turns`` adds what happened: the prompt the agent read first, then per turn the agent's
text (or tool-call message), the searches it ran with the documents each returned, the
env's reply (documents as shown, or the feedback to a malformed turn) and the step's
reward. ``searchgym view`` draws it (:mod:`searchgym.view`). A reply that only shows the
turn's documents as the protocol renders them is not kept twice: its ``observation`` is
None (:data:`SHOWN_AS_DOCUMENTS`); a summarized reply (RECON) or feedback is kept.

Texts are cut (:data:`TEXT_CHARS`, :data:`DOC_CHARS`) so that a benchmark of thousands of
episodes keeps a readable ``episodes.jsonl``; a cut text ends with :data:`CUT_MARK`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

#: Most characters kept of the prompt, each turn's text and each observation.
TEXT_CHARS = 4000
#: Most characters kept of each retrieved document's text.
DOC_CHARS = 2000
#: What ends a text that was cut.
CUT_MARK = " […]"
#: Characters of each document's text that must appear in a reply for it to count as the
#: documents shown as they are (then the reply is not kept beside them).
SHOWN_AS_DOCUMENTS = 80


def cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, :data:`CUT_MARK` at the end when it was longer."""
    return text if len(text) <= limit else text[:limit] + CUT_MARK


def action_text(action: Any) -> str:
    """A turn as text: the string itself, or a tool-call message (a dict) as JSON."""
    if isinstance(action, str):
        return action
    try:
        return json.dumps(action, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(action)


def prompt_entry(observation: Any) -> dict[str, Any]:
    """The entry of the reset: the prompt as the agent read it (with s3's first documents)."""
    return {"prompt": cut(action_text(observation), TEXT_CHARS)}


def turn_entry(action: Any, observation: Any, reward: float, info: Mapping[str, Any]) -> dict[str, Any]:
    """One step: the agent's turn, the queries it searched, the env's reply and the reward.
    The documents are added at the end of the episode (:func:`add_documents`)."""
    queries = info.get("queries")
    if queries is None:
        queries = [info["query"]] if info.get("query") else []
    return {
        "turn": int(info.get("turn", 0)),
        "text": cut(action_text(action), TEXT_CHARS),
        "kinds": [str(k) for k in info.get("action_kinds", ())],
        "queries": [str(q) for q in queries],
        "observation": cut(action_text(observation), TEXT_CHARS),
        "invalid_reason": info.get("invalid_reason"),
        "reward": float(reward),
        "searches": [],
        **context_entry(info),
    }


def context_entry(info: Mapping[str, Any]) -> dict[str, Any]:
    """``{"context": ...}`` when the env's context policy acted on this step (a summary asked
    for, results archived, a restart with its summary); empty otherwise."""
    rewrite, request = info.get("context_rewrite"), info.get("context_request")
    if rewrite is None and request is None:
        return {}
    if rewrite is None:
        return {"context": {"policy": str(request.get("policy")), "kind": "summary_request", "text": cut(str(request.get("request", "")), TEXT_CHARS)}}
    entry = {"policy": str(rewrite.get("policy")), "kind": str(rewrite.get("kind"))}
    if rewrite.get("kind") == "restart":
        entry.update(text=cut(str(rewrite.get("summary", "")), TEXT_CHARS), by=str(rewrite.get("by")))
    else:
        entry.update(text=cut("\n".join(map(str, rewrite.get("stubs", ()))), TEXT_CHARS),
                     archived_turns=[int(t) for t in rewrite.get("archived_turns", ())])
    return {"context": entry}


def add_documents(turns: list[dict[str, Any]], searches: Sequence[Any]) -> None:
    """Put each search the env ran (:class:`~searchgym.rewards.SearchRecord`: turn, query,
    ids, ``"title\\ntext"`` texts) under the turn that asked for it, in place."""
    by_turn = {entry["turn"]: entry for entry in turns if "turn" in entry}
    for search in searches:
        entry = by_turn.get(search.turn)
        if entry is None:
            continue
        docs = []
        for doc_id, text in zip(search.ids, search.texts):
            title, _, body = text.partition("\n")
            docs.append({"id": str(doc_id), "title": title, "text": cut(body, DOC_CHARS)})
        entry["searches"].append({"query": search.query, "docs": docs})
    for entry in turns:
        docs = [d for s in entry.get("searches", ()) for d in s["docs"]]
        observation = entry.get("observation")
        if docs and observation and not entry.get("invalid_reason") and all(d["text"][:SHOWN_AS_DOCUMENTS] in observation for d in docs):
            entry["observation"] = None


def add_calls(turns: list[dict[str, Any]], record: Any, protocol: Any) -> None:
    """Put each action of a protocol's own that it describes (``protocol.describe_action(action)``
    -> a JSON-able dict, or None: the browse game's ``open``, ``find`` and cited answer) under
    the turn that made it as ``calls``, in order, with ``"ran": False`` for a call the budget
    refused; and the question's ``evidence_ids`` and ``gold_ids`` (``QAExample.metadata``, never
    shown to the agent) on the prompt entry as ``labels``, so a reader checks the citations. In
    place; nothing for a protocol without ``describe_action``."""
    describe = getattr(protocol, "describe_action", None)
    if not callable(describe):
        return
    by_turn = {entry["turn"]: entry for entry in turns if "turn" in entry}
    described = False
    for recorded in record.turns:
        entry = by_turn.get(recorded.round + 1)  # a record's round is the env's turn minus one
        if entry is None:
            continue
        ran = "budget" not in recorded.observation
        for action in recorded.parsed:
            call = describe(action)
            if call is not None:
                entry.setdefault("calls", []).append(dict(call) if ran else {**call, "ran": False})
                described = True
    metadata = getattr(record, "metadata", None) or {}
    labels = {key: [str(i) for i in ([metadata[key]] if isinstance(metadata[key], str) else metadata[key])]
              for key in ("evidence_ids", "gold_ids") if metadata.get(key)}
    if described and labels and turns and "prompt" in turns[0]:
        turns[0]["labels"] = labels


def token_record(trajectory: Any, tokenizer: Any) -> list[list[Any]]:
    """An LM episode's token record as text pieces: ``[kind, [piece, ...]]`` per span in order,
    ``kind`` ``"prompt"`` and ``"observation"`` (``loss_mask`` 0: the env wrote them) or
    ``"generated"`` (``loss_mask`` 1: the policy sampled them); each piece is one id decoded
    alone, so a character split across ids shows as U+FFFD in each. An episode whose context
    was rewritten gives each of its records in order, each from its own ``"prompt"`` span."""
    records = trajectory.records() if callable(getattr(trajectory, "records", None)) else [trajectory]
    spans = []
    for record in records:
        spans.append(["prompt", list(record.prompt_ids)])
        spans += [["generated" if s.generated else "observation", list(s.token_ids)] for s in record.segments]
    return [[kind, [tokenizer.decode([i]) for i in ids]] for kind, ids in spans if ids]
