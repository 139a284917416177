"""gpuwise's SQLite stores, the one place that speaks SQL about them.

Two files, kept apart on purpose: ``runs.sqlite`` (`runs.py`: profiled runs, tune sessions, load tests and
bench results, one row each with the whole result as JSON) and ``monitor.sqlite`` (`history.py`: the
monitor recorder's samples, written every second for months, so its locks never block the run store).
`paths.py` says where both live. The store deals in rows and JSON documents only: turning a document
back into a `ProfileRun`, a `LoadtestResult` or a `TuneResult` is the owning package's job, so this
package imports nothing above `errors`.
"""

__all__: list[str] = []
