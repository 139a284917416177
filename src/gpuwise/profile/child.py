"""The profiled process's side of ``gpuwise profile``: attach when torch is imported, write the record.

Activated by ``_boot/sitecustomize.py`` when ``GPUWISE_PROFILE`` is set. It waits for the script to
import torch (a post-import hook, so processes that never use torch pay nothing), starts a
``Recorder``, and writes ``run-<pid>.json`` into the directory the parent gave it:
- when the requested steps have been measured (hooks are then removed; ``stop`` ends the script),
- every ``FLUSH_EVERY_S`` while running, from its own thread, when it has changed (so a hard kill
  loses at most about a second of steps),
- at exit, whatever the cause: normal end, exception, Ctrl-C, SIGTERM or SIGHUP.
A process that never ran a step, a forward or a DataLoader batch (torchrun's agent, helper
processes) writes nothing. In torchrun's agent, each rank's exit code is written as
``exit-<pid>.json`` (the rank's own process cannot know it: ``SystemExit`` skips the excepthook).
Only the standard library is imported here before torch is.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.util
import json
import os
import signal
import sys
import threading
import time
from typing import Any

ENV = "GPUWISE_PROFILE"
# A flush replays the event log itself, so a SIGKILL loses the steps since the last flush (<= 0.5 s plus
# the open step and the write): the README's "at most the last 2 s" with margin on a loaded machine.
FLUSH_EVERY_S = 0.5
# ... unless a flush itself is slow (a very long --steps window): then at most 1/50 of the time flushing
FLUSH_DUTY_LIMIT = 50

_state: dict[str, Any] = {
    "recorder": None,
    "config": None,
    "exc": None,
    "written_final": False,
    "last_flush": 0.0,
    "complete_written": False,
    "flushed_steps": -1,  # steps in the last flush (-1: none yet)
    "steps_written": 0,  # steps appended to the steps file so far
    "flush_cost_s": 0.0,  # CPU time of the last flush
}
_write_lock = threading.Lock()


def _is_helper_process() -> bool:
    """multiprocessing's spawned workers, forkserver and resource tracker are not the training script."""
    argv = list(getattr(sys, "orig_argv", None) or sys.argv)
    return "--multiprocessing-fork" in argv or any(a.startswith("from multiprocessing") for a in argv)


def _is_launcher() -> bool:
    """torchrun's agent only starts the ranks (which attach themselves): no need to watch it."""
    argv = list(getattr(sys, "orig_argv", None) or sys.argv)
    return any(
        os.path.basename(a) == "torchrun" or a in {"torch.distributed.run", "torch.distributed.launch"}
        for a in argv[:4]
    )


def activate() -> None:
    """Attach the profiler to this process when ``GPUWISE_PROFILE`` is set (called by ``sitecustomize``).

    Helper processes are skipped; torchrun's agent only watches its ranks' exits; any other process starts
    the recorder now if torch is already imported, else at ``import torch``.
    """
    raw = os.environ.get(ENV)
    if not raw or _is_helper_process():
        return
    if _is_launcher():
        _watch_rank_exits(json.loads(raw)["out_dir"])
        return
    _state["config"] = json.loads(raw)
    _note_startup_failure()
    if "torch" in sys.modules:
        _start()
    else:
        sys.meta_path.insert(0, _TorchImportHook())


def _note_startup_failure() -> None:
    """An exception that ends the script before any torch activity (a syntax error, a missing module)
    leaves ``failed-<pid>.json`` with the traceback's last line, so gpuwise says why nothing was profiled."""
    previous = sys.excepthook

    def excepthook(exc_type, exc, tb):
        recorder = _state["recorder"]
        if recorder is None or not _active(recorder):
            try:
                import traceback

                line = traceback.format_exception_only(exc_type, exc)[-1].strip()
                if isinstance(exc, SyntaxError) and exc.filename:
                    line = f"{line} ({os.path.basename(exc.filename)}, line {exc.lineno})"
                path = os.path.join(_state["config"]["out_dir"], f"failed-{os.getpid()}.json")
                with open(path, "w") as fh:
                    json.dump({"pid": os.getpid(), "error": line, "argv": list(sys.argv)}, fh)
            except Exception:
                pass  # the script's own traceback is still printed below
        previous(exc_type, exc, tb)

    sys.excepthook = excepthook


def _watch_rank_exits(out_dir: str) -> None:
    """In torchrun's agent: note each child's exit code once ``Popen`` learns it (poll or wait), so
    the launcher can tell a rank that exited 3 from one that completed."""
    import subprocess

    def written(method):
        def call(self, *args, **kwargs):
            result = method(self, *args, **kwargs)
            if self.returncode is not None and not getattr(self, "_gpuwise_exit_written", False):
                self._gpuwise_exit_written = True
                try:
                    with open(os.path.join(out_dir, f"exit-{self.pid}.json"), "w") as fh:
                        json.dump({"pid": self.pid, "returncode": self.returncode}, fh)
                except OSError:
                    pass  # the run is still recorded; only its status may be less exact
            return result

        return call

    subprocess.Popen.poll = written(subprocess.Popen.poll)  # type: ignore[method-assign]
    subprocess.Popen.wait = written(subprocess.Popen.wait)  # type: ignore[method-assign]


class _TorchImportHook(importlib.abc.MetaPathFinder):
    """Start profiling right after ``import torch`` finishes.

    The hook stays in ``sys.meta_path`` until torch's module has actually run: a bare
    ``importlib.util.find_spec("torch")`` (``datasets`` and ``transformers`` call it before importing
    torch) gets a spec whose loader is patched, but that spec is never executed, so the next lookup
    (the real ``import torch``, ``importlib.import_module`` or a ``LazyLoader``) is patched again.
    """

    def __init__(self) -> None:
        self._busy = False  # our own lookup of torch's spec must not recurse into this hook

    def find_spec(self, fullname, path, target=None):
        if fullname != "torch" or self._busy or _state["recorder"] is not None:
            return None
        self._busy = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                find = getattr(finder, "find_spec", None)
                if finder is self or find is None:
                    continue
                spec = find(fullname, path, target)
                if spec is not None:
                    break
        finally:
            self._busy = False
        if spec is None or spec.loader is None or getattr(spec.loader, "_gpuwise_patched", False):
            return spec
        loader = spec.loader
        original = loader.exec_module
        hook = self

        def exec_module(module):
            original(module)
            if hook in sys.meta_path:
                sys.meta_path.remove(hook)
            if _state["recorder"] is None:
                _start()

        # patched on this one loader object (not its class): torch's module runs, then profiling starts
        loader.exec_module = exec_module
        loader._gpuwise_patched = True
        return spec


def _rank_meta(cfg: dict[str, Any]) -> dict[str, Any]:
    def env_int(name: str) -> int | None:
        value = os.environ.get(name)
        return int(value) if value and value.lstrip("-").isdigit() else None

    script = next((a for a in sys.argv if a.endswith(".py")), sys.argv[0] if sys.argv else "python")
    return {
        "command": cfg.get("command"),
        "script": os.path.basename(script) or "python",
        "argv": list(sys.argv),
        "rank": env_int("RANK"),
        "local_rank": env_int("LOCAL_RANK"),
        "world_size": env_int("WORLD_SIZE"),
        "group_id": cfg.get("group_id"),
    }


def _start() -> None:
    cfg = _state["config"]
    if os.environ.get("GPUWISE_TUNE"):  # a `gpuwise tune` trial: its knobs, before the script's model
        try:
            from gpuwise.profile import knobs_boot

            knobs_boot.apply()
        except Exception as exc:
            print(f"gpuwise: could not apply the tune trial's knobs ({exc})", file=sys.stderr)
    try:
        from gpuwise.profile.recorder import Recorder

        meta = _rank_meta(cfg)
        recorder = Recorder(
            steps=cfg.get("steps"),
            warmup=int(cfg.get("warmup", 5)),
            telemetry=cfg.get("telemetry", True),
            sample_interval_s=float(cfg.get("interval_s", 0.5)),
            label=meta["script"],
            meta=meta,
            on_window_complete=_window_complete,
        )
        recorder.start()
    except Exception as exc:
        print(
            f"gpuwise: could not attach the profiler ({type(exc).__name__}: {exc}); "
            "the script runs unprofiled",
            file=sys.stderr,
        )
        return
    _state["recorder"] = recorder
    threading.Thread(target=_flush_periodically, name="gpuwise-flush", daemon=True).start()
    atexit.register(_at_exit)
    previous_hook = sys.excepthook

    def excepthook(exc_type, exc, tb):
        _state["exc"] = (exc_type, exc)
        previous_hook(exc_type, exc, tb)

    sys.excepthook = excepthook
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGHUP):
            if signal.getsignal(signum) is signal.SIG_DFL:  # the script's own handler wins
                signal.signal(signum, _on_stop_signal)


def _active(recorder) -> bool:
    return recorder.has_activity()


def _write(raw: dict[str, Any], partial: bool = False) -> None:
    """Replace the record; a ``partial`` one (a periodic flush, built on the telemetry thread) never
    replaces a complete one written meanwhile (at the window's end or at exit)."""
    cfg = _state["config"]
    out_dir = cfg["out_dir"]
    path = os.path.join(out_dir, f"run-{os.getpid()}.json")
    tmp = path + ".tmp"
    with _write_lock:
        if partial and _state["complete_written"]:
            return
        _state["complete_written"] = not partial
        with open(tmp, "w") as fh:
            json.dump(raw, fh)
        os.replace(tmp, path)


def _flush_periodically() -> None:
    """Its own thread, not the telemetry sampler's: the flush keeps its pace with --interval 5 or
    with telemetry off."""
    while not _state["written_final"] and not _state["complete_written"]:
        time.sleep(FLUSH_EVERY_S)
        _maybe_flush()


def _maybe_flush() -> None:
    """Called from the flush thread: a partial record, in case the process is killed hard. Steps are
    appended to ``steps-<pid>.jsonl`` (only the new ones: a flush costs the same at step 100 and 100k);
    ``run-<pid>.json`` is rewritten without them and names that file."""
    recorder = _state["recorder"]
    now = time.monotonic()
    if (
        recorder is None
        or _state["written_final"]
        or _state["complete_written"]  # the window's record is written: nothing partial to add
        or now - _state["last_flush"] < max(FLUSH_EVERY_S, FLUSH_DUTY_LIMIT * _state["flush_cost_s"])
        or not _active(recorder)
    ):
        return
    _state["last_flush"] = now
    cpu0 = time.thread_time()
    try:
        raw = recorder.raw(steps_from=_state["steps_written"])
        total = raw.pop("steps_total")
        if total == _state["flushed_steps"]:
            return  # nothing new since the last flush
        if total < _state["steps_written"]:  # steps were folded back into the open one: start over
            _state["steps_written"] = 0
            raw = recorder.raw(steps_from=0)
            total = raw.pop("steps_total")
        _state["flushed_steps"] = total
        raw["status"] = "incomplete"  # what the record says if nothing better replaces it
        _write_partial(raw)
    except Exception:
        pass
    finally:
        _state["flush_cost_s"] = time.thread_time() - cpu0  # CPU, not wall: a loaded machine stretches wall


def _write_partial(raw: dict[str, Any]) -> None:
    steps = raw.pop("steps")
    name = f"steps-{os.getpid()}.jsonl"
    path = os.path.join(_state["config"]["out_dir"], name)
    with _write_lock:
        if _state["complete_written"]:
            return
        with open(path, "w" if _state["steps_written"] == 0 else "a") as fh:
            fh.write("".join(json.dumps(step) + "\n" for step in steps))
        _state["steps_written"] += len(steps)
    raw["steps"] = []
    raw["steps_file"] = name
    _write(raw, partial=True)


def _window_complete(recorder) -> None:
    cfg = _state["config"]
    measured = recorder.steps_closed - recorder.warmup
    _write(recorder.raw())
    if cfg.get("stop"):
        print(
            f"gpuwise: measured {measured} steps after {recorder.warmup} warm-up steps; "
            "stopping the script (--stop)",
            file=sys.stderr,
        )
        _state["written_final"] = True
        raise SystemExit(0)
    print(
        f"gpuwise: measured {measured} steps after {recorder.warmup} warm-up steps; profiler detached, "
        "the script continues (pass --stop to end it here)",
        file=sys.stderr,
    )


def _final_status() -> tuple[str | None, str | None]:
    exc = _state["exc"]
    if exc is None:
        return None, None
    exc_type, value = exc
    if issubclass(exc_type, KeyboardInterrupt):
        return "interrupted", "KeyboardInterrupt"
    return "error", f"{exc_type.__name__}: {value}"


def _at_exit(status: str | None = None, error: str | None = None) -> None:
    recorder = _state["recorder"]
    if recorder is None or _state["written_final"]:
        return
    _state["written_final"] = True
    try:
        if status is None:
            status, error = _final_status()
        if status is None and recorder.window_complete and _state["complete_written"]:
            # the window's record is on disk and the script ended cleanly: nothing to add. Rewriting it
            # here kept the exiting process ~0.1 s longer, time in which a script's daemon thread (a
            # prefetch loop) got back into torch ops the interpreter's shutdown then aborted (exit 134,
            # 3 runs in 12 under two CPU burners, never bare)
            return
        if recorder.window_complete and status is None:
            status = "completed"
        raw = recorder.stop(status=status, error=error)
        if _active(recorder):
            _write(raw)
    except Exception as exc:
        print(f"gpuwise: could not save the profile ({type(exc).__name__}: {exc})", file=sys.stderr)


def _on_stop_signal(signum, frame) -> None:
    """SIGTERM / SIGHUP: save the run as interrupted, then die of the signal as the script would have."""
    _at_exit(status="interrupted", error=signal.Signals(signum).name)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


__all__ = ["activate"]
