"""Thread counts under a shared CPU: the tuner's rule on a controlled clock, and the
transformers backend's threads option on a real model."""

import pytest
import torch

import searchgym.lm.threads as threads_module
from searchgym.error import ConfigError
from searchgym.lm.hf import TransformersLM
from searchgym.lm.threads import ThreadTuner


class Clock:
    """Wall and process CPU time of a process whose threads get ``cores`` cores."""

    def __init__(self):
        self.wall = self.cpu = 0.0
        self.cores = 2.0

    def run_step(self):
        threads = torch.get_num_threads()
        self.wall += 1.0
        self.cpu += min(threads, self.cores)


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(threads_module.time, "perf_counter", lambda: clock.wall)
    monkeypatch.setattr(threads_module.time, "process_time", lambda: clock.cpu)
    caller = torch.get_num_threads()
    torch.set_num_threads(2)
    yield clock
    torch.set_num_threads(caller)


def play(tuner, clock, steps):
    seen = []
    for _ in range(steps):
        with tuner.step():
            seen.append(torch.get_num_threads())
            clock.run_step()
    return seen


def test_alone_the_caller_count_stays_and_nothing_is_tried(clock):
    tuner = ThreadTuner(torch)
    with tuner.session():
        assert set(play(tuner, clock, 500)) == {2}
    assert (tuner.choice, tuner.tries, tuner.changes) == (2, 0, 0) and tuner.share == 1.0


def runs_of(value, seen):
    """(start, length) of each run of ``value`` in ``seen``."""
    runs, start = [], None
    for i, v in enumerate([*seen, None]):
        if v == value and start is None:
            start = i
        elif v != value and start is not None:
            runs.append((start, i - start))
            start = None
    return runs


def test_a_lost_core_drops_the_count_and_a_freed_core_restores_it(clock):
    tuner = ThreadTuner(torch, window=8, min_period=64, max_period=256)
    with tuner.session():
        clock.cores = 1.2  # another process holds most of a core
        assert play(tuner, clock, 8) == [2] * 8
        assert tuner.choice == 1 and tuner.share == pytest.approx(0.6) and tuner.changes == 1
        # Still shared: the full count is tried for one window after a period, which doubles.
        seen = play(tuner, clock, 800)
        tries = runs_of(2, seen)
        assert [length for _, length in tries] == [8] * len(tries) and len(tries) == tuner.tries == 4
        gaps = [tries[0][0]] + [b[0] - (a[0] + a[1]) for a, b in zip(tries, tries[1:])]
        for gap, period in zip(gaps, (64, 128, 256, 256)):  # max_period caps the doubling
            assert period <= gap <= period + 2
        assert tuner.choice == 1 and tuner.changes == 1
        clock.cores = 2.0  # the other process ended: the next try keeps the full count
        seen = play(tuner, clock, 300)
        assert tuner.choice == 2 and tuner.changes == 2 and seen[-100:] == [2] * 100
    assert torch.get_num_threads() == 2  # the caller's count, restored


def test_the_session_restores_the_caller_count_and_follows_its_changes(clock):
    tuner = ThreadTuner(torch, window=4)
    with tuner.session():
        clock.cores = 1.0
        play(tuner, clock, 4)
        assert tuner.choice == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    with tuner.session():
        assert torch.get_num_threads() == 1  # the tuned count carries over to the next call
    torch.set_num_threads(1)  # the caller asks for one thread: nothing to tune
    with tuner.session():
        assert play(tuner, clock, 20) == [1] * 20 and tuner.choice == 1
    torch.set_num_threads(2)
    clock.cores = 2.0
    with tuner.session():  # a changed caller count starts over from it
        assert play(tuner, clock, 8) == [2] * 8 and tuner.choice == 2


def test_transformers_threads_option_sets_the_count_while_generating_and_restores_it():
    caller = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        fixed = TransformersLM("tiny-random", threads=1, prefix_cache_mb=0)
        seen = []
        fixed.model.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
        one = fixed.generate(["hello there", "a longer prompt of words"], max_new_tokens=6, temperature=0.0)
        assert set(seen) == {1} and torch.get_num_threads() == 2 and fixed.tuner is None
        auto = TransformersLM("tiny-random", prefix_cache_mb=0)
        assert auto.threads == "auto" and auto.tuner is not None
        two = auto.generate(["hello there", "a longer prompt of words"], max_new_tokens=6, temperature=0.0)
        assert [g.token_ids for g in two] == [g.token_ids for g in one]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(caller)
    for bad in (0, -1, True, 1.5, "two"):
        with pytest.raises(ConfigError, match="expects threads to be 'auto' .* or a positive integer"):
            TransformersLM("tiny-random", threads=bad)
