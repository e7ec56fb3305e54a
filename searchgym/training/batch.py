"""Trajectories as padded tensors, and the model's logprobs of them.

:func:`collate` pads trajectories into a :class:`TokenBatch`; :func:`forward_logprobs` is
one forward pass of a model over it; :func:`fixed_pass` computes, without gradients, what
an update reads but does not train (old logprobs, a :class:`Reference`'s logprobs, values).

Layout: each row is the whole context (prompt and response ids), right-padded. Losses
live on *targets*: column ``j`` of a ``[B, L-1]`` tensor is about ``input_ids[:, j+1]``,
predicted from position ``j``. ``loss_mask[:, j]`` is 1 exactly where ``input_ids[:, j+1]``
is an id the policy sampled; prompt, observation and padding targets are 0.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from searchgym.error import ConfigError


@dataclass
class TokenBatch:
    """Padded trajectories (see the module docstring for the layout)."""

    input_ids: Any  #: [B, L] long
    attention_mask: Any  #: [B, L] long, 1 on real tokens
    loss_mask: Any  #: [B, L-1] float, 1 on sampled targets
    rollout_logprobs: Any  #: [B, L-1] float, the engine's logprob of each sampled target (0 elsewhere)

    def __len__(self) -> int:
        return int(self.input_ids.shape[0])

    def select(self, rows: Sequence[int]) -> TokenBatch:
        """The given rows, trimmed to their longest sequence."""
        import torch

        index = torch.as_tensor(list(rows), dtype=torch.long)
        width = int(self.attention_mask[index].sum(dim=1).max())
        return TokenBatch(
            self.input_ids[index, :width],
            self.attention_mask[index, :width],
            self.loss_mask[index, : width - 1],
            self.rollout_logprobs[index, : width - 1],
        )

    def to(self, device: Any) -> TokenBatch:
        return TokenBatch(*(t.to(device) for t in (self.input_ids, self.attention_mask, self.loss_mask, self.rollout_logprobs)))


def collate(trajectories: Sequence[Any], *, pad_id: int = 0, max_length: int | None = None) -> TokenBatch:
    """Stack :class:`~searchgym.agents.trajectory.Trajectory` records into a :class:`TokenBatch`.

    ``max_length`` cuts longer contexts (the cut tokens get no loss). A trajectory with no
    generated token raises: nothing of it could be trained.
    """
    import torch

    if not trajectories:
        raise ConfigError("collate expects at least one trajectory, got none.")
    rows = []
    for i, t in enumerate(trajectories):
        ids = t.context_ids()
        mask = [0] * len(t.prompt_ids) + t.loss_mask
        logprobs = [0.0] * len(t.prompt_ids) + [0.0 if lp is None else float(lp) for lp in t.response_logprobs]
        if max_length is not None:
            ids, mask, logprobs = ids[:max_length], mask[:max_length], logprobs[:max_length]
        if not any(mask[1:]):
            raise ConfigError(
                f"Trajectory {i} has no generated token to train on (its loss mask is all 0); drop it before collating."
            )
        rows.append((ids, mask, logprobs))
    width = max(len(ids) for ids, _, _ in rows)
    B = len(rows)
    input_ids = torch.full((B, width), pad_id, dtype=torch.long)  # [B, L]
    attention = torch.zeros((B, width), dtype=torch.long)  # [B, L]
    loss_mask = torch.zeros((B, width - 1), dtype=torch.float32)  # [B, L-1]
    rollout = torch.zeros((B, width - 1), dtype=torch.float32)  # [B, L-1]
    for r, (ids, mask, logprobs) in enumerate(rows):
        n = len(ids)
        input_ids[r, :n] = torch.tensor(ids, dtype=torch.long)
        attention[r, :n] = 1
        loss_mask[r, : n - 1] = torch.tensor(mask[1:], dtype=torch.float32)
        rollout[r, : n - 1] = torch.tensor(logprobs[1:], dtype=torch.float32)
    return TokenBatch(input_ids, attention, loss_mask, rollout)


def forward_logprobs(
    model: Any, batch: TokenBatch, *, temperature: float = 1.0, with_entropy: bool = False, entropy_grad: bool = True,
    with_hidden: bool = False,
) -> dict[str, Any]:
    """Run ``model`` on ``batch``: ``logprobs`` of every target [B, L-1] (logits divided by
    ``temperature`` as the sampler did), optionally ``entropy`` [B, L-1] and the last
    ``hidden`` states [B, L-1, H] (for a value head). ``entropy_grad=False`` computes the
    entropy outside autograd (a metric only: no [B, L-1, V] graph kept for backward).
    """
    import torch
    from torch.nn.functional import pad

    temperature = 1.0 if temperature == 0 else float(temperature)
    # Targets before the first one any row trains on (the prompts) get no loss, so the
    # logits are computed from there on only: they are most of a [B, L-1, V] tensor.
    L = batch.input_ids.shape[1]
    trained = batch.loss_mask.sum(dim=0).nonzero()
    start = int(trained[0, 0]) if len(trained) and _keeps_logits(model) else 0
    out = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        output_hidden_states=with_hidden,
        use_cache=False,
        **({"logits_to_keep": L - start} if start else {}),
    )
    logits = out.logits[:, :-1].float() / temperature  # [B, L-1-start, V]
    logp = torch.log_softmax(logits, dim=-1)  # [B, L-1-start, V]
    targets = batch.input_ids[:, start + 1 :]  # [B, L-1-start]
    # Left-padded with zeros back to [B, L-1]: the positions before start are masked out.
    result = {"logprobs": pad(logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1), (start, 0))}  # [B, L-1]
    if with_entropy:
        with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
            result["entropy"] = pad(-(logp.exp() * logp).sum(dim=-1), (start, 0))  # [B, L-1]
    if with_hidden:
        result["hidden"] = out.hidden_states[-1][:, :-1]  # [B, L-1, H]
    return result


def _keeps_logits(model: Any) -> bool:
    """Whether ``model`` (or the model a peft wrapper holds) takes ``logits_to_keep``."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "logits_to_keep" in inspect.signature(base.forward).parameters


class Reference:
    """The frozen policy of the KL term: the LoRA model with its adapters switched off, or
    (full fine-tuning) a frozen copy of the model taken before training."""

    def __init__(self, model: Any, peft_model: Any = None):
        self.peft_model = peft_model
        self.model = model if peft_model is not None else copy.deepcopy(model).eval().requires_grad_(False)

    def logprobs(self, batch: TokenBatch, *, temperature: float) -> Any:
        """[B, L-1] logprobs of the batch's targets under the reference, without gradients."""
        import torch

        adapters_off = self.peft_model.disable_adapter() if self.peft_model is not None else contextlib.nullcontext()
        with torch.no_grad(), adapters_off:
            return forward_logprobs(self.model, batch, temperature=temperature)["logprobs"]  # [b, w]


@dataclass
class FixedPass:
    """Per-token tensors of the batch computed before the update (None: not needed)."""

    old: Any  #: [B, L-1] the model's logprobs before the update; None when the update's own pass gives them
    ref: Any  #: [B, L-1] the reference's logprobs (a KL term)
    values: Any  #: [B, L-1] the critic's estimates (PPO)


def fixed_pass(
    model: Any, batch: TokenBatch, *, micro_batch_size: int, temperature: float, device: Any, with_old: bool,
    reference: Reference | None, critic: Any = None,
) -> FixedPass:
    """Old logprobs (when ``with_old``), reference logprobs and a ``critic``'s values of the batch
    (:mod:`searchgym.training.critic`), micro-batch by micro-batch, without gradients; no
    forward pass at all when none of them is needed."""
    import torch

    B, L = batch.input_ids.shape
    old = torch.zeros(B, L - 1) if with_old else None  # [B, L-1]
    ref = torch.zeros(B, L - 1) if reference is not None else None  # [B, L-1]
    values = torch.zeros(B, L - 1) if critic is not None else None  # [B, L-1]
    shared_head = critic is not None and critic.needs_policy_hidden
    if old is None and ref is None and values is None:
        return FixedPass(None, None, None)
    model.eval()
    if critic is not None:
        critic.eval()
    with torch.no_grad():
        for rows in chunks(list(range(B)), micro_batch_size):
            mb = batch.select(rows).to(device)
            w = mb.input_ids.shape[1] - 1
            out: dict[str, Any] = {}
            if old is not None or shared_head:
                out = forward_logprobs(model, mb, temperature=temperature, with_hidden=shared_head)
            if old is not None:
                old[rows, :w] = out["logprobs"].cpu()  # [b, w]
            if values is not None:
                values[rows, :w] = critic.values(mb, out.get("hidden")).cpu()  # [b, w]
            if ref is not None:
                ref[rows, :w] = reference.logprobs(mb, temperature=temperature).cpu()  # [b, w]
    model.train()
    if critic is not None:
        critic.train()
    return FixedPass(old, ref, values)


def chunks(rows: Sequence[int], size: int) -> Iterator[list[int]]:
    """``rows`` in consecutive pieces of at most ``size``."""
    for start in range(0, len(rows), size):
        yield list(rows[start : start + size])
