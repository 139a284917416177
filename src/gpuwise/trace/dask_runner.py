"""Ranks as tasks on an existing ``dask.distributed`` cluster (``gpuwise trace DIR --dask ADDRESS``).

One task per rank runs `rank_summary.summarize` on a worker, which reads the file where it is (a shared
filesystem path, or an fsspec URL: ``s3://``, ``gs://``...) and sends back the rank's summary (~35 KB),
never its events. gpuwise must be installed on the workers (the same version: the summary is a pickled
`RankAnalysis`). Results stream back as tasks finish, so the driver's memory is the summaries only.

A task that raises, or whose worker dies more often than the scheduler allows (``KilledWorker``), loses
its rank alone. Ctrl-C (or any exit before the end) cancels every task still queued or running.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from collections.abc import Iterator
from typing import Any

from gpuwise.errors import GpuwiseError
from gpuwise.trace.rank_summary import RankFailure, RankSummary, summarize

__all__ = ["DASK_HINT", "connect", "run_dask"]

DASK_HINT = "--dask needs dask.distributed: pip install 'gpuwise[dask]'"
_BATCH = 256  # results fetched from the scheduler per round trip
_CLOSE_TIMEOUT_S = 10.0


def connect(address: str) -> Any:
    """A `distributed.Client` on the scheduler at ``address`` (``tcp://host:8786``); one line if the
    `dask` extra is missing or the scheduler does not answer."""
    try:
        from distributed import Client
    except ImportError:
        raise GpuwiseError(DASK_HINT) from None
    # Errors inside the client's event loop (a callback racing Ctrl-C) are dask's own plumbing, not the
    # user's: tornado would print them as tracebacks over the one-line contract.
    logging.getLogger("tornado.application").setLevel(logging.CRITICAL)
    try:
        return Client(address, timeout="20s", set_as_default=False)
    except (OSError, TimeoutError, ValueError) as err:
        raise GpuwiseError(
            f"--dask {address}: no Dask scheduler answers there ({err}): start one "
            "(dask scheduler; dask worker ADDRESS) or check DASK_SCHEDULER_ADDRESS"
        ) from None


def run_dask(
    sources: list[str], address: str, hashed: bool = True
) -> Iterator[tuple[int, RankSummary | RankFailure]]:
    """Submit one task per rank to the cluster at ``address``; yield (index, outcome) as tasks finish
    (``hashed``: hash each file's content, the summary cache's key)."""
    from distributed import as_completed

    client = connect(address)
    run = uuid.uuid4().hex[:12]  # task keys are global on the scheduler: two runs must not share one
    futures: list[Any] = []
    finished = 0
    try:  # from the first submission: a Ctrl-C while they go out must close the client too
        futures = client.map(
            summarize,
            sources,
            pure=False,
            key=[f"gpuwise-rank-{run}-{i}" for i in range(len(sources))],
            hashed=hashed,
        )
        index = {f.key: i for i, f in enumerate(futures)}
        for batch in as_completed(futures, loop=client.loop, raise_errors=False).batches():
            for fut in batch:
                i = index[fut.key]
                yield i, _outcome(fut, sources[i])
                fut.release()
                finished += 1
    finally:
        # Ctrl-C, an error, or the caller stopped reading: free the cluster (closing the client alone
        # releases whatever was submitted before ``futures`` was bound)
        try:
            if finished < len(futures):
                logging.getLogger("distributed").setLevel(logging.CRITICAL)  # comms closed mid-task: expected
                client.cancel(futures, force=True)
        finally:
            _close(client)


def _close(client: Any) -> None:
    """Close the client within ``_CLOSE_TIMEOUT_S``: a scheduler too busy to confirm (the tasks are already
    cancelled) must not hold up a Ctrl-C'd run, nor turn its exit 130 into an internal error."""
    with contextlib.suppress(TimeoutError, OSError):
        client.close(timeout=_CLOSE_TIMEOUT_S)


def _outcome(fut: Any, source: str) -> RankSummary | RankFailure:
    if fut.status == "finished":
        result: RankSummary | RankFailure = fut.result()
        return result
    err = fut.exception()
    return RankFailure(
        source, f"the Dask task failed ({type(err).__name__}: {err}); the other ranks are kept"
    )
