"""Helpers shared by the language-model backend tests."""

import math
from contextlib import contextmanager

import pytest

#: Prompts the engine backends are compared on.
PROMPTS = ["The city of Marrowgate", "What is the capital of France?", "0123456789 + - * /"]


def assert_same_generations(ours, theirs, atol=2e-3):
    """The same ids, texts and finish reasons, and logprobs within ``atol``."""
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        assert (a.token_ids, a.text, a.finish_reason) == (b.token_ids, b.text, b.finish_reason)
        assert all(math.isclose(x, y, abs_tol=atol) for x, y in zip(a.logprobs, b.logprobs)), (a.logprobs, b.logprobs)


@contextmanager
def pushed_noise(engine, model):
    """Noise added to ``model``'s weights and pushed to ``engine`` (``update_weights``); both
    get the original weights back afterwards."""
    import torch

    original = {n: t.detach().clone() for n, t in model.state_dict().items()}
    try:
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn(p.shape, generator=torch.Generator().manual_seed(1)) * 0.05)
        engine.update_weights(model.state_dict().items())
        yield
    finally:
        engine.update_weights(original.items())
        model.load_state_dict(original)


def ascii_window(text):
    """A two-character printable ASCII piece of ``text`` after its first character (a stop
    string the greedy continuation is known to produce)."""
    for i in range(1, len(text) - 1):
        if all(" " < c < "~" for c in text[i : i + 2]):
            return text[i : i + 2]
    pytest.skip(f"no ASCII piece in {text!r}")


def recording_lm(respond):
    """A scripted model (tiny tokenizer) whose ``batches`` lists the number of prompts of
    every ``generate`` call it served: how tests see what was batched together."""
    from searchgym.lm.scripted import ScriptedLM
    from searchgym.lm.testing import tiny_tokenizer

    class RecordingLM(ScriptedLM):
        def __init__(self):
            super().__init__(respond, tiny_tokenizer())
            self.batches = []

        def _generate(self, prompt_ids, params):
            self.batches.append(len(prompt_ids))
            return super()._generate(prompt_ids, params)

    return RecordingLM()


def one_core_clock(monkeypatch):
    """Replace the thread tuner's clocks with one on which the process gets one core:
    each reading adds 1 s of wall time and 1 s of CPU time, so every pass of 2 threads
    measures a CPU share of 0.5."""
    import searchgym.lm.threads as threads_module

    clock = {"wall": 0.0, "cpu": 0.0}

    def tick(key):
        clock[key] += 1.0
        return clock[key]

    monkeypatch.setattr(threads_module.time, "perf_counter", lambda: tick("wall"))
    monkeypatch.setattr(threads_module.time, "process_time", lambda: tick("cpu"))


def rescored_samples(trainer, trajectories):
    """Each trajectory with its generated tokens' logprobs recomputed by ``trainer.model`` (so an
    update's ratio is exactly 1), twice, rewarded 1.0 and 0.0, as a group of its own: samples for
    ``trainer.update``."""
    import torch

    samples = []
    for group, t in enumerate(trajectories):
        ids = torch.tensor([t.context_ids()])
        with torch.no_grad():
            logp = torch.log_softmax(trainer.model(input_ids=ids).logits[0, :-1].float(), -1)
        start = len(t.prompt_ids)
        lps = [float(logp[start + i - 1, tok_id]) for i, tok_id in enumerate(t.response_ids)]
        segments, at = [], 0
        for s in t.segments:
            segments.append(type(s)(s.token_ids, tuple(lps[at: at + len(s)]) if s.generated else None, s.generated, s.finish_reason))
            at += len(s)
        t.segments = segments
        samples += [type("S", (), {"trajectory": t, "reward": r, "group": group})() for r in (1.0, 0.0)]
    return samples
