"""Token-level RL training: advantages and losses as small pure functions (torch).

Every tensor is ``[B, T]`` over response tokens unless noted; ``loss_mask`` is 1 on
tokens the policy generated and 0 on environment tokens and padding.

Entry points: ``Trainer(Args(...)).train()`` (``searchgym train``),
:func:`searchgym.training.sft.sft`, :func:`searchgym.training.distill.distill_summarizer`
and :func:`searchgym.training.stage_sets.stage_sets`. Without the ``lm`` extra each
raises :class:`~searchgym.error.MissingDependencyError` with the install command, as the
command line does.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Args", "Trainer", "TrainerHook"]


def __getattr__(name: str) -> Any:
    # Lazy: ``searchgym.training.Args`` needs no torch; ``Trainer`` imports it only when asked for.
    if name == "Args":
        from searchgym.training.args import Args

        return Args
    if name == "Trainer":
        from searchgym.training.trainer import Trainer

        return Trainer
    if name == "TrainerHook":  # no torch: a user's hook module imports it without the lm extra
        from searchgym.training.hooks import TrainerHook

        return TrainerHook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
