"""What each role of a team episode is told: its ``info``, read from the game's public state.

The keys are documented with :class:`~searchgym.envs.team.multi_agent.SearchTeamEnv` (its
Information section); the multi-agent env and the role
envs call :func:`role_info`. Nothing here changes the game.
"""

from __future__ import annotations

from typing import Any

from searchgym.envs.team.game import TeamGame


def role_info(game: TeamGame, role: str) -> dict[str, Any]:
    """``role``'s info: the question, its turn counters and context size, the search so far
    and, once the episode is over, the answer and the rewards."""
    seat = game.seats[role]
    context_chars, context_tokens = seat.context_size()
    info: dict[str, Any] = {
        "example_id": game.example.id,
        "question": game.example.question,
        "acting": game.current == role,
        "turn": seat.turns,
        **seat.last,
        "retrieved_ids": retrieved_ids(game, role),
        "selected_ids": [h.passage.id for h in game.selected],
        "num_searches": game.num_searches,
        "num_invalid": seat.invalid,
        "context_chars": context_chars,
        "context_tokens": context_tokens,
        "summary_tokens": game.summary_tokens,
        "observation_truncated": seat.observation_truncated,
    }
    if role == "summarizer" and game.windows:
        info["query"] = game.windows[-1].query  # the retrieval it condenses (or last condensed)
    if seat.turns == 0 and seat.prompt_messages is not None:
        info["prompt_messages"] = [dict(m) for m in seat.prompt_messages]
    if game.done:
        info.update(
            answer=game.answer,
            prediction=game.outcome["prediction"],
            answers=tuple(game.example.answers),
            reward_components=dict(game.outcome["reward_components"][role]),
            team_rewards=dict(game.outcome["team_rewards"]),
            search_truncated=game.search_truncated,
            context_ids=[h.passage.id for h in game.context],
        )
    return info


def retrieved_ids(game: TeamGame, role: str) -> list[str]:
    """The documents ``role`` is working on: the searcher's latest window (numbered from 1),
    the retrieval the summarizer condenses, the generator's context."""
    if role == "searcher":
        return list(game.searcher_doc_ids)
    if role == "summarizer":
        return [h.passage.id for h in game.windows[-1].hits] if game.windows else []
    return [h.passage.id for h in game.context]
