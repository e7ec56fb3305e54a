"""Thread counts under a shared CPU: the tuner's rule on a controlled clock and a fake
thread setter, and the transformers backend's threads option on the tiny model."""

import pytest
import torch

import searchgym.lm.threads as threads_module
from searchgym.error import ConfigError
from searchgym.lm.hf import TransformersLM
from searchgym.lm.threads import ThreadTuner, fixed_threads
from lm_helpers import one_core_clock


class FakeTorch:
    """torch's thread-count calls, and the wall and CPU time of a process whose threads
    get ``cores`` cores."""

    def __init__(self, threads=2):
        self.threads = threads
        self.sets = []
        self.wall = self.cpu = 0.0
        self.cores = 2.0

    def get_num_threads(self):
        return self.threads

    def set_num_threads(self, threads):
        self.sets.append(threads)
        self.threads = threads

    def run_pass(self):
        self.wall += 1.0
        self.cpu += min(self.threads, self.cores)

    def idle(self, seconds):
        """Single-threaded work between passes (sampling, stop strings)."""
        self.wall += seconds
        self.cpu += seconds * 0.1


@pytest.fixture
def fake(monkeypatch):
    fake = FakeTorch()
    monkeypatch.setattr(threads_module.time, "perf_counter", lambda: fake.wall)
    monkeypatch.setattr(threads_module.time, "process_time", lambda: fake.cpu)
    return fake


def play(tuner, fake, passes):
    seen = []
    for _ in range(passes):
        with tuner.step():
            seen.append(fake.threads)
            fake.run_pass()
    return seen


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


def test_alone_the_caller_count_stays_and_nothing_is_tried(fake):
    tuner = ThreadTuner(fake)
    with tuner.session():
        assert set(play(tuner, fake, 500)) == {2}
    assert (tuner.choice, tuner.tries, tuner.changes, tuner.passes) == (2, 0, 0, 500) and tuner.share == 1.0
    assert fake.sets == []  # alone, the count is never even set


def test_a_lost_core_drops_the_count_and_a_freed_core_restores_it(fake):
    tuner = ThreadTuner(fake, window=8, min_period=64, max_period=256)
    with tuner.session():
        fake.cores = 1.2  # another process holds most of a core
        assert play(tuner, fake, 8) == [2] * 8
        assert tuner.choice == 1 and tuner.share == pytest.approx(0.6) and tuner.changes == 1
        assert fake.threads == 1  # set at once, for the work before the next pass too
        # Still shared: the full count is tried for one window after a period, which doubles.
        seen = play(tuner, fake, 800)
        tries = runs_of(2, seen)
        assert [length for _, length in tries] == [8] * len(tries) and len(tries) == tuner.tries == 4
        gaps = [tries[0][0]] + [b[0] - (a[0] + a[1]) for a, b in zip(tries, tries[1:])]
        for gap, period in zip(gaps, (64, 128, 256, 256)):  # max_period caps the doubling
            assert period <= gap <= period + 2
        assert tuner.choice == 1 and tuner.changes == 1
        fake.cores = 2.0  # the other process ended: the next try keeps the full count
        seen = play(tuner, fake, 300)
        assert tuner.choice == 2 and tuner.changes == 2 and seen[-100:] == [2] * 100
    assert fake.threads == 2  # the caller's count, restored


def test_the_session_restores_the_caller_count_and_follows_its_changes(fake):
    tuner = ThreadTuner(fake, window=4)
    with tuner.session():
        fake.cores = 1.0
        play(tuner, fake, 4)
        assert tuner.choice == 1 and fake.threads == 1
    assert fake.threads == 2
    with tuner.session():
        assert fake.threads == 1  # the tuned count carries over to the next call
    fake.threads = 1  # the caller asks for one thread: nothing to tune
    with tuner.session():
        assert play(tuner, fake, 20) == [1] * 20 and tuner.choice == 1
    fake.threads = 2
    fake.cores = 2.0
    with tuner.session():  # a changed caller count starts over from it
        assert play(tuner, fake, 8) == [2] * 8 and tuner.choice == 2


def test_only_marked_passes_are_measured(fake):
    # Single-threaded work between an end and the next start (generate's sampling and
    # stop strings) would read as a lost core; it is not measured.
    tuner = ThreadTuner(fake, window=4)
    with tuner.session():
        for _ in range(40):
            tuner.start_pass()
            fake.run_pass()
            tuner.end_pass()
            fake.idle(5.0)
        assert tuner.choice == 2 and tuner.share == 1.0 and tuner.passes == 40
        tuner.end_pass()  # no pass started: nothing measured
        tuner.start_pass()
        fake.idle(100.0)  # a pass started, then the loop stopped
        tuner.start_pass()  # the next start drops it
        fake.run_pass()
        tuner.end_pass()
        assert tuner.passes == 41 and tuner.choice == 2


def test_fixed_threads_sets_the_count_inside_and_restores_it(fake):
    with fixed_threads(fake, 1):
        assert fake.threads == 1
    assert fake.threads == 2 and fake.sets == [1, 2]
    with pytest.raises(RuntimeError), fixed_threads(fake, 1):
        raise RuntimeError("generation failed")
    assert fake.threads == 2


@pytest.mark.parametrize(
    "options, message",
    [
        ({"window": 0}, "ThreadTuner expects window to be a positive integer (passes), got 0."),
        ({"min_period": 1.5}, "ThreadTuner expects min_period to be a positive integer (passes), got 1.5."),
        ({"min_period": 8, "max_period": 4}, "ThreadTuner expects max_period >= min_period, got 4 < 8."),
        ({"low": 0}, "ThreadTuner expects low to be a share in (0, 1], got 0."),
        ({"low": True}, "ThreadTuner expects low to be a share in (0, 1], got True."),
    ],
)
def test_bad_tuner_options_are_refused(options, message):
    with pytest.raises(ConfigError) as e:
        ThreadTuner(FakeTorch(), **options)
    assert str(e.value) == message


PROMPTS = ["hello there", "a longer prompt of words"]


@pytest.fixture
def two_threads():
    caller = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(caller)


def counts_seen(lm):
    """The thread count of each forward pass of ``lm``'s model (a test-side hook)."""
    seen = []
    lm.model.register_forward_pre_hook(lambda *_: seen.append(torch.get_num_threads()))
    return seen


def test_threads_1_generates_at_one_thread_and_restores_the_caller_count(two_threads):
    lm = TransformersLM("tiny-random", device="cpu", threads=1)
    seen = counts_seen(lm)
    one = lm.generate(PROMPTS, max_new_tokens=6, temperature=0.0)
    assert set(seen) == {1} and len(seen) == 6 and torch.get_num_threads() == 2 and lm.tuner is None
    two = TransformersLM("tiny-random", device="cpu", threads=2).generate(PROMPTS, max_new_tokens=6, temperature=0.0)
    auto = TransformersLM("tiny-random", device="cpu").generate(PROMPTS, max_new_tokens=6, temperature=0.0)
    assert [g.token_ids for g in two] == [g.token_ids for g in one] == [g.token_ids for g in auto]
    assert all(len(g.token_ids) == 6 for g in one)
    assert torch.get_num_threads() == 2


def test_auto_measures_every_forward_pass_and_tunes_the_passes_that_follow(two_threads, monkeypatch):
    one_core_clock(monkeypatch)  # every pass measures a CPU share of 0.5 for 2 threads
    lm = TransformersLM("tiny-random", device="cpu")
    assert lm.threads == "auto" and lm.tuner is lm.tuner  # one tuner per calling thread
    seen = counts_seen(lm)
    lm.generate(["hello there"], max_new_tokens=12, temperature=0.0)
    # The prefill and 11 decode steps; the first window of 8 passes at 2 threads, then 1.
    assert seen == [2] * 8 + [1] * 4
    assert (lm.tuner.passes, lm.tuner.choice, lm.tuner.share, lm.tuner.changes) == (12, 1, 0.5, 1)
    assert torch.get_num_threads() == 2  # the caller's count, restored
    seen.clear()
    lm.generate(PROMPTS, max_new_tokens=4, temperature=1.0, seed=0)
    assert seen == [1] * 4 and torch.get_num_threads() == 2  # the tuned count carries over


def test_on_cuda_the_option_changes_nothing():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    lm = TransformersLM("tiny-random", device="cuda", threads=1)
    caller = torch.get_num_threads()
    seen = counts_seen(lm)
    lm.generate(PROMPTS, max_new_tokens=3, temperature=0.0)
    assert set(seen) == {caller} and lm.tuner is None


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "two", None])
def test_bad_threads_are_refused(bad):
    with pytest.raises(ConfigError) as e:
        TransformersLM("tiny-random", threads=bad)
    assert str(e.value) == f"TransformersLM expects threads to be 'auto' (tuned while generating) or a positive integer, got {bad!r}."


def test_load_lm_passes_the_option_through():
    from searchgym.lm.registry import load_lm

    assert load_lm("tiny-random", threads=1, cache=False).threads == 1
    assert load_lm("tiny-random", cache=False).threads == "auto"
    with pytest.raises(ConfigError, match="expects threads to be 'auto'"):
        load_lm("tiny-random", threads="all", cache=False)
