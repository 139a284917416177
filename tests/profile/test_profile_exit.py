"""What the profiler does while the profiled program exits (issue 27: the program's exit must not change).

Once the measured window's record is on disk and the script ends cleanly, the exit adds nothing: the record
is not rebuilt and rewritten. That rewrite kept the exiting process ~0.1 s longer, in which a script's daemon
prefetch thread went back into torch ops that the interpreter's shutdown then aborted ("terminate called
without an active exception", exit 134): 3 of 12 profiled runs of benchmarks/real_scripts/nanogpt_like.py
--prefetch under two CPU burners, 0 of 12 bare, 0 of 16 profiled after this change.
"""

from __future__ import annotations

import pytest

from gpuwise.profile import child


class _Recorder:
    """The two things `_at_exit` asks of the recorder, and whether it was asked to stop."""

    def __init__(self, window_complete: bool) -> None:
        self.window_complete = window_complete
        self.stopped_with: tuple[str | None, str | None] | None = None

    def stop(self, status=None, error=None):
        self.stopped_with = (status, error)
        return {"status": status, "error": error}

    def has_activity(self) -> bool:
        return True


@pytest.fixture
def state(monkeypatch):
    writes: list[dict] = []
    monkeypatch.setattr(child, "_write", lambda raw, partial=False: writes.append(raw))
    monkeypatch.setattr(child, "_state", dict(child._state, written_final=False, exc=None))
    return writes


def test_a_clean_exit_after_the_written_window_rewrites_nothing(state):
    recorder = _Recorder(window_complete=True)
    child._state.update(recorder=recorder, complete_written=True)
    child._at_exit()
    assert state == [] and recorder.stopped_with is None


def test_an_error_after_the_window_is_still_written_down(state):
    recorder = _Recorder(window_complete=True)
    child._state.update(recorder=recorder, complete_written=True, exc=(RuntimeError, RuntimeError("boom")))
    child._at_exit()
    assert recorder.stopped_with == ("error", "RuntimeError: boom")
    assert state == [{"status": "error", "error": "RuntimeError: boom"}]


def test_a_run_that_ends_before_its_window_closes_is_written_at_exit(state):
    recorder = _Recorder(window_complete=False)
    child._state.update(recorder=recorder, complete_written=False)
    child._at_exit()
    assert recorder.stopped_with == (None, None) and len(state) == 1


def _settled(exit_code: int, world_size: int | None, status: str = "completed") -> dict:
    from gpuwise.profile.launcher import settle_status

    raw = {"status": status, "steps": [{}], "meta": {"world_size": world_size}}
    settle_status(raw, exit_code, forwarded=None)
    return raw


def test_a_rank_aborting_after_its_saved_window_is_told_apart_as_pytorchs_exit_race():
    # gloo's worker thread ended inside a destructor at interpreter exit: unprofiled runs do it too
    rank = _settled(128 + 6, world_size=2)
    assert rank["status"] == "interrupted"
    assert rank["error"].startswith("killed by SIGABRT after its measured window was saved")
    assert "pytorch/pytorch#190489" in rank["error"] and "unprofiled runs hit too" in rank["error"]


@pytest.mark.parametrize(
    ("exit_code", "world_size", "status"),
    [(128 + 6, None, "completed"), (128 + 6, 2, "incomplete"), (128 + 9, 2, "completed")],
    ids=["not-distributed", "window-not-saved", "sigkill"],
)
def test_other_signal_deaths_are_only_named(exit_code, world_size, status):
    raw = _settled(exit_code, world_size, status)
    assert raw["error"] in ("killed by SIGABRT", "killed by SIGKILL")
