"""Helpers shared by the language-model backend tests."""

import pytest


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
