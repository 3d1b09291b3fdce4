"""Gets recorded work into the store, in the background or right away, and never loses it to a passing fault.

Work items are callables that encode live values and return a ``Batch``;
running them on the writer thread keeps encoding off the graph's thread in the
default mode. In ``sync`` mode the same item runs and commits before the
caller returns, waiting for a locked store at most ``lock_wait`` seconds. In
``exit`` mode (``hold``) items wait, unrun, until ``release()`` (the run ended),
``flush`` or ``close``: a graph that never waits on a model or a tool (a replay
answers them from the recording) then runs without the writer thread taking
the interpreter from it at every step, which costs it more than the encoding.

A write that fails on something that passes (a lock, a full disk, a read-only
file, a killed PostgreSQL connection, a store not reachable yet) is *kept*:
its rows wait, in order, and go in with the next commit, retried in the
background until the store takes them. Everything kept commits in one
transaction, run rows before their steps, so a run is never partly there
without its run row. Kept rows are bounded (``KEEP_BYTES``); past the bound the
steps and calls are dropped and counted, never the run rows. A row the store
refuses for what it is (not a passing fault) is written apart and, if it still
fails, dropped and counted, so it cannot hold back the rows after it.

A SQLite file deleted or replaced while recording is noticed before each
commit: SQLite would go on writing into the deleted file without a word, so
nothing more is written there.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import shlex
import sys
import threading
import time
import weakref
from collections.abc import Callable

from graphtape.recorder.bounded_write import BoundedWrites
from graphtape.recorder.errors import StoreError
from graphtape.recorder.records import FLAG_PENDING
from graphtape.recorder.rescue import blobs_used, describe_rows, refused_for_good, rescue, whole_runs
from graphtape.recorder.store import Batch, RunStore, _sqlite_path, is_duplicate, is_passing
from graphtape.recorder.store.read_only import is_read_only_error
from graphtape.recorder.unwritten import UnwrittenRows

Work = Callable[[], Batch | None]
# (what failed, the rows it concerns, whether those rows are lost for good)
FaultHandler = Callable[[Exception, Batch | None, bool], None]
Opener = Callable[[], RunStore]
# Told, before the next work item encodes, of runs whose steps were dropped: their next frame must
# be a keyframe with its blobs, not a delta on a step the store will never hold. Called where work
# items run (they alone touch the encoders), so it takes no lock of the runs.
RowsLost = Callable[[set[str]], None]

# How long ``sync`` waits for a locked or unreachable store before the run goes on
# and its rows are left to the background retry.
LOCK_WAIT_S = 2.0
# Rows kept while the store does not take them, in bytes of payloads, blobs and text.
KEEP_BYTES = 256 * 2**20
# How long a try of rows kept while the store fails waits for a lock (a retry, a try at close):
# such tries come again on a backoff, and a try under way holds up whatever waits for it (the
# close, a graph waiting for the writer to catch up), so each one waits briefly.
RETRY_LOCK_WAIT_S = 0.25
# The shortest wait of the close's last tries (``_last_try``), even once its time is spent.
LAST_TRY_MIN_S = 0.1
# How long ``close`` (and interpreter exit) keeps trying to write kept rows.
CLOSE_WAIT_S = 10.0
# How much longer ``close`` waits for a writer still encoding what was submitted (CPU work that
# ends, bounded by the encoder's budgets) before it gives up on it.
ENCODE_WAIT_S = 60.0
_MAX_GROUP = 400
# A group of queued work is committed once encoding it took this long, whatever its size: a run
# of large states is written as it goes, not held for one transaction at its end.
_GROUP_MAX_S = 1.0
# When the queued work would take the writer longer than this to encode (measured on the items
# it encoded), ``submit`` waits for it to catch up: a graph that makes work faster than it can be
# encoded slows to the writer's pace rather than hold every state in memory and lose them at exit.
BACKLOG_MAX_S = 2.0
# How long ``submit`` waits for a writer that takes no queued work meanwhile (it is inside a write
# the store does not answer, or waits on a lock) before the graph goes on: the work stays queued,
# in order, and the graph waits for the writer again only once the writer takes work again.
# The wait is ``lock_wait`` (what a first try of a locked store may take) plus this.
CATCH_UP_STALL_S = 1.0
# Items ``hold`` keeps before it lets the writer start anyway: a long run's memory stays bounded.
HOLD_MAX = 4000
# The background writer is woken, not handed each item: work goes in when the graph is about to
# wait (a model, tool or HTTP call starts: ``wake``), when it waited PAUSE_S or more between two
# items (it waits on something no call shows, and will again), when a run ends, on a flush or
# close, and at least every BUSY_MAX_S (sooner past BUSY_MAX_ITEMS). A graph busy on the CPU
# hands it a superstep every few hundred microseconds. A writer woken then wants the interpreter
# back at once, and gets it only when the graph blocks; until then every brief release of the
# interpreter by the graph's thread (each uuid4 reads os.urandom) costs that thread a context
# switch (measured: 40 µs a superstep, 10%, on a message loop).
#
# BUSY_MAX_S is what a SIGKILL can lose of a graph that waits between steps: SQLite runs in WAL
# mode with synchronous=NORMAL, so a commit survives the process being killed (only a power cut
# may take the last ones), and what is lost is what the writer had not committed yet. Measured
# with benchmarks/soak_kill_window.py (12 kills each): at 3 ms a step, worst 386 ms at 0.5 s, worst
# 103 ms at 0.1 s; a graph busy on the CPU loses up to what the writer is behind by (BACKLOG_MAX_S
# bounds it; worst 0.9 s, median 64 ms). 0.1 s costs the graph no measurable time (bench_recorder:
# the default mode's ratio to InMemorySaver moved within its noise, 1.29x before, 1.14x after).
PAUSE_S = 0.005
BUSY_MAX_S = 0.1
BUSY_MAX_ITEMS = 2000
_RETRY_FIRST_S = 0.05
_RETRY_MAX_S = 1.0

_log = logging.getLogger("graphtape")


class Writer:
    """Serializes work items into store transactions and keeps what the store did not take yet."""

    def __init__(
        self,
        store: RunStore | None,
        *,
        background: bool,
        on_fault: FaultHandler,
        lock_wait: float = LOCK_WAIT_S,
        opener: Opener | None = None,
        open_error: Exception | None = None,
        keep_bytes: int = KEEP_BYTES,
        hold: bool = False,
        on_rows_lost: RowsLost | None = None,
    ) -> None:
        self.background = background
        self.hold = hold and background
        self._held: list[Work] = []
        self._hold_lock = threading.Lock()
        self.on_fault = on_fault
        self.lock_wait = lock_wait
        self.keep_bytes = keep_bytes
        self._opener = opener
        self.open_error: Exception | None = None
        self._lock = threading.RLock()  # work items, kept rows, the fault state
        self._io = threading.Lock()  # one store write at a time
        self._busy = threading.Lock()  # held by the writer's thread while it works (a fork waits for it)
        self._kept = Batch()
        self._kept_bytes = 0
        self._inflight = 0  # rows of a write under way, taken out of _kept
        self._untried_since = 0.0  # when the oldest kept row no try has had yet came (time.monotonic())
        self._failing: Exception | None = None  # the fault of the episode under way
        self._told: set[str] = set()  # runs told of that fault
        # Faults are handed to ``on_fault`` outside the writer's locks: the handler takes the
        # run's lock, which a graph thread may hold while it waits to submit.
        self._faults: list[tuple[Exception, Batch | None, bool]] = []
        self._bell = threading.Event()  # the writer's thread: take up what is queued (or retry kept rows) now
        self._queued = 0  # items queued since the writer last took them up (approximate: not locked)
        self._item_s = 0.0  # the writer's recent encoding time per item (a moving average)
        self._taken = 0  # work items the writer's thread has run (``_catch_up`` sees it move)
        self._stalled_at = -1  # ``_taken`` when ``_catch_up`` last gave up on the writer
        self._submitted_at = 0.0
        self._queue: queue.SimpleQueue[Work | None | threading.Event] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._closed = False
        self._encoding = False  # the writer's thread is running a work item (encoding values)
        self._file: tuple[str, tuple[int, int]] | None = None
        self._gone: str = ""  # why the SQLite file is no longer the one recorded into (deleted, replaced)
        self._bounded = BoundedWrites()  # sync commits to a server store (bounded_write)
        # Steps and calls the store will not get (dropped, or rescued to a file): their runs end ``incomplete``.
        self.unwritten = UnwrittenRows()
        self._on_rows_lost = on_rows_lost
        self._rekey: set[str] = set()  # runs whose steps were dropped since the last work item ran
        # (run, namespace) whose last state the store refused for good: their deltas built on it
        # are left out until a keyframe of that namespace comes (``_leave_out_orphans``).
        self._orphaned: set[tuple[str, str]] = set()
        self._kept_tried = False  # the kept steps and calls include some a try failed on (so they may be dropped)
        self._retry_at = 0.0  # while the store fails, when the background writer tries it again
        self._backoff = _RETRY_FIRST_S
        self._encode_lost: list[Batch] = []  # stand-ins for rows whose encoding raised (``_rows_of``), until their group is kept
        self.store: RunStore | None = None
        if store is not None:
            self._adopt(store)
        else:
            # Not opened yet: a fault from the start, so sync runs never wait on the opening;
            # the background retry opens the store and writes what was kept meanwhile.
            self.open_error = open_error
            self._failing = open_error or StoreError("the store is not open yet")
        _live_writers.add(self)
        if background:
            self._start_thread(self._loop)
            _flush_on_sigterm()

    # -- public ----------------------------------------------------------------
    def submit(self, work: Work, *, with_next: bool = False) -> None:
        """Queue work (background) or run and commit it now (sync, waiting at most ``lock_wait``).

        ``with_next``: in sync mode, run it now but commit it with the next work that commits
        (a call's row goes in with its superstep's, one commit instead of two).
        """
        if self._closed:
            return
        if self.hold:
            with self._hold_lock:
                self._held.append(work)
                if len(self._held) < HOLD_MAX:
                    return
            self.release()
            return
        if self.background:
            if self._thread is None:
                self._restart_after_fork()
            now = time.monotonic()
            waited, self._submitted_at = now - self._submitted_at, now
            self._queue.put(work)
            self._queued += 1
            # Work queued, then a wait before this item: the graph waits between steps (on
            # something no call shows), so it will likely wait again while the writer goes.
            if (waited >= PAUSE_S and self._queued > 1) or self._queued >= BUSY_MAX_ITEMS:
                self._bell.set()
            if self._item_s * self._queued > BACKLOG_MAX_S:
                self._catch_up()
            return
        try:
            self._submit_now(work, commit=not with_next)
        finally:
            self._dispatch()

    def wake(self) -> None:
        """The graph is about to wait (a call starts): take up what is queued, meanwhile."""
        if self._queued:
            self._bell.set()

    def release(self) -> None:
        """A run ended: let the writer run what is queued now, and what ``hold`` kept back (in the order it was submitted)."""
        with self._hold_lock:
            held, self._held = self._held, []
            for work in held:  # under the lock: a submit racing this one queues after them
                self._queue.put(work)
        if self.background:
            if self._thread is None:
                self._restart_after_fork()
            self._bell.set()

    def _submit_now(self, work: Work, *, commit: bool = True) -> None:
        self._lock.acquire()
        try:
            batch = self._run(work)
            if batch:
                self._keep(batch)
            if self._encode_lost:
                self._with_ends(self._kept)
            if not self._kept or not commit:
                return
            if self._failing is not None:
                self._start_retry()  # the store is failing: the run goes on, the retry has its rows
                return
        finally:
            self._lock.release()
        if not self._io.acquire(timeout=self.lock_wait):
            self._start_retry()
            return
        commit = self._write_kept_then_release
        ok = self._bounded.run(commit, self.lock_wait + 1.0) if getattr(self.store, "is_sqlite", True) is False else commit()
        if not ok:
            self._start_retry()

    def flush_before_dying(self, timeout: float) -> None:
        """Like ``flush``, from a signal handler: it may run on a thread that is inside ``submit``,
        so no lock is waited on for long, and whatever is not written within ``timeout`` is left."""
        if not (self.background and self._thread is not None and self._thread.is_alive()):
            return
        if self._hold_lock.acquire(timeout=0.2):
            try:
                held, self._held = self._held, []
                for work in held:
                    self._queue.put(work)
            finally:
                self._hold_lock.release()
        done = threading.Event()
        self._queue.put(done)
        self._bell.set()
        done.wait(timeout)

    def _write_kept_then_release(self) -> bool:
        """A sync commit (on the bounded thread for a server store): it holds ``_io`` until the store answers."""
        try:
            return self._write_kept(self.lock_wait)
        finally:
            self._io.release()

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until everything submitted so far was tried; ``True`` if nothing is left kept."""
        self.release()
        if self.background and self._thread is not None and self._thread.is_alive():
            done = threading.Event()
            self._queue.put(done)
            self._bell.set()
            if not done.wait(timeout):
                return False
        else:
            with self._lock:  # rows a retry thread has taken are no longer kept, but not written yet
                waiting = bool(self._kept) or self._inflight > 0
            # Wait for that retry's try to end (it holds ``_io``), then write what is still kept.
            if waiting and self._io.acquire(timeout=-1 if timeout is None else timeout):
                try:
                    self._write_kept(self.lock_wait if timeout is None else min(timeout, self.lock_wait))
                finally:
                    self._io.release()
            self._dispatch()
        return not self._kept and not self._inflight

    def close(self, timeout: float | None = CLOSE_WAIT_S, *, at_exit: bool = False) -> None:
        """Flush, keep trying kept rows for up to ``timeout`` seconds, then stop: what is left goes
        to a rescue file or is offered to the store run by run (``_rescue``), else is counted lost.

        ``at_exit``: the program looks finished, so a wait for the store says why it is still there.
        """
        if self._closed:
            return
        limit = CLOSE_WAIT_S if timeout is None else timeout
        started = time.monotonic()
        deadline = started + limit
        flushed = self.flush(limit)
        # A writer still encoding (a very large state on a busy machine) is doing work that ends,
        # unlike a store that stopped answering: it is given up to ENCODE_WAIT_S more, else the
        # run it encodes would be lost for want of a few seconds.
        more = time.monotonic() + ENCODE_WAIT_S
        while not flushed and self._encoding and time.monotonic() < more:
            flushed = self.flush(max(0.1, more - time.monotonic()))
            deadline = max(deadline, time.monotonic() + 1.0)
        self._closed = True
        if self._thread is not None:
            self._queue.put(None)
            self._bell.set()
            # A try under way ends within its own budget (``lock_wait``) even past ``timeout``: its
            # rows come back kept, and go to the store's last try or a rescue file below.
            self._thread.join(max(0.0, deadline - time.monotonic()) + self.lock_wait + 1.0)
        if self._bounded.busy:
            self._bounded.idle.wait(self.lock_wait + 1.0)
        if self.held_by_the_store:
            # A write the store never answers (a server gone silent, a blackholed route) holds
            # the writer: what it was writing, and what waits behind it, is said lost, not left unsaid.
            waited = time.monotonic() - started
            self._fault(StoreError(f"the store did not answer a write within {waited:.1f} s of closing: the rows of that write, and any queued behind it, may be lost"), None, lost=True)
        if at_exit and self._kept and not self._gone and deadline - time.monotonic() > 1.0:
            sys.stderr.write(
                f"graphtape: the store has not taken {_rows(self._kept)} rows ({_why(self._failing)}); "
                f"trying for {deadline - time.monotonic():.0f} s more before exit (Ctrl-C stops)\n"
            )
        delay = _RETRY_FIRST_S
        # A server that answered and refused (no such database or role, a wrong password) will
        # not take the rows within the wait: they are rescued at once.
        hopeless = self.store is None and refused_for_good(self.open_error)
        while self._kept and not self._gone and not hopeless:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self._io.acquire(timeout=left):
                try:
                    if self._write_kept(min(left, self.lock_wait)):
                        break
                finally:
                    self._io.release()
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, _RETRY_MAX_S)
        with self._lock:
            left_over, self._kept, self._kept_bytes = self._kept, Batch(), 0
        if left_over:
            self._rescue(left_over, deadline=deadline)
        self._dispatch()
        _live_writers.discard(self)

    def _rescue(self, left_over: Batch, *, deadline: float) -> None:
        """What the store never took goes to a rescue file (``rescue``): whole runs, and what is
        left of the runs it holds part of once the store is asked for those once more
        (``_last_try``); the rest is lost, and the line that says so names its runs and steps."""
        if self._orphaned:
            # The deltas built on a step the store refused for good are no more whole in a rescue
            # file than in the store (the last try, which would leave them out, may not come: a
            # deleted file, a store still inside a write). Their runs' ends, rescued too, say so.
            self._leave_out_orphans(left_over, ends=left_over)
        whole, rest = whole_runs(left_over)
        why = _why(self._failing or self.open_error)
        if rest and self._last_try(rest, left_over.blobs, deadline):
            rest = Batch()
        target = getattr(self.store, "url", "") or ""
        try:
            path = rescue(whole, rest=rest, pool=left_over.blobs, target=_shown(target)) if whole.runs_new or rest else None
        except Exception:  # noqa: BLE001 - a rescue that fails is the loss it was to prevent, no worse
            path = None
        if path is not None:
            self.unwritten.note(rest)  # in the rescue file, not the store: the run's end says so
            shown = shlex.quote(str(path))
            if whole.runs_new:
                runs = len(whole.runs_new)
                self._fault(StoreError(f"the store never took {runs} run{'s' * (runs != 1)} ({why}): saved to {shown} instead (graphtape --db {shown} runs)"), whole, lost=False)
            if rest:
                into = shlex.quote(_shown(target)) if target else "STORE"
                self._fault(
                    StoreError(f"{_counted(_rows(rest), 'row')} could not be written before the recorder closed ({describe_rows(rest)}): {why}; saved to {shown} (once the store takes writes again: graphtape --db {into} import-rescue {shown})"),
                    Batch(steps=rest.steps, calls=rest.calls, runs_update=rest.runs_update),
                    lost=False,
                )
                self._dispatch()
        else:
            rest.merge(whole)
        if not rest:
            return
        # The last updates of runs the store holds (their end: status, faults) are offered to it
        # alone, once what is lost (or rescued) of those runs is noted on them (the handler adds it
        # to the updates, waiting here): a run then reads as it ended, with the fault that says
        # which of its steps are missing and where they are, rather than as killed.
        never_taken = {row["id"] for row in rest.runs_new}  # a rescue that failed: no row to update
        updates = [u for u in rest.runs_update if u[0] not in never_taken]
        if path is None:
            lost = Batch(runs_new=rest.runs_new, steps=rest.steps, calls=rest.calls, calls_update=rest.calls_update, runs_update=[u for u in rest.runs_update if u[0] in never_taken])
            self.unwritten.note(lost)
            if lost:
                self._fault(StoreError(f"{_counted(_rows(lost), 'row')} could not be written before the recorder closed ({describe_rows(lost)}): {why}"), Batch(runs_new=lost.runs_new, steps=lost.steps, calls=lost.calls, runs_update=rest.runs_update), lost=True)
                self._dispatch()
        if updates and not self._last_try(Batch(runs_update=updates), {}, deadline) and path is None:
            ends = Batch(runs_update=updates)
            self._fault(StoreError(f"{_counted(_rows(ends), 'row')} could not be written before the recorder closed ({describe_rows(ends)}): {why}"), ends, lost=True)

    def _last_try(self, batch: Batch, blobs: dict[str, tuple[bool, bytes]], deadline: float) -> bool:
        """One more write at close of rows of runs the store holds part of (with the blobs of
        ``blobs`` they use): ``True`` if the store took them. Never waits on a write under way."""
        store = self.store
        if not batch or store is None or self._gone or self.held_by_the_store or not self._io.acquire(timeout=0.5):
            return False
        budget = max(LAST_TRY_MIN_S, min(self._try_wait(self.lock_wait), deadline - time.monotonic()))

        def write() -> bool:
            try:
                attempt = Batch(runs_update=batch.runs_update, steps=batch.steps, calls=batch.calls, calls_update=batch.calls_update, blobs=blobs_used(batch, blobs) if blobs else {})
                self._write(store, attempt, budget, again=True)
                return True
            except Exception:  # noqa: BLE001 - the store still refuses: what it holds back is said lost
                return False
            finally:
                self._io.release()

        # A server that stopped answering holds a write on the bounded thread, not the close.
        return bool(self._bounded.run(write, budget + 1.0) if getattr(store, "is_sqlite", True) is False else write())

    @property
    def held_by_the_store(self) -> bool:
        """Whether the writer's thread is still inside a write the store has not answered."""
        return (self._thread is not None and self._thread.is_alive()) or self._bounded.busy

    @property
    def failing(self) -> Exception | None:
        """Why the store refuses writes now (``None`` while it takes them)."""
        return self._failing

    @property
    def kept_rows(self) -> int:
        """Rows waiting for the store to take them (0 when all is written)."""
        return _rows(self._kept) + self._inflight

    def open_store(self) -> RunStore:
        """The store, opening it now if it could not be opened yet (``StoreError`` if it still cannot)."""
        if self.store is None:
            with self._io:
                self._ensure_store()
        if self.store is None:
            raise self.open_error if isinstance(self.open_error, StoreError) else StoreError(_why(self.open_error))
        return self.store

    # -- internals: keeping and writing ----------------------------------------
    def _catch_up(self) -> None:
        """Wait until the writer has encoded what is queued down to half the backlog bound
        (never on the writer's own thread, nor once it has stopped). A writer that finishes no work
        item for ``lock_wait`` plus ``CATCH_UP_STALL_S`` (held by the store), or for ``ENCODE_WAIT_S``
        while it encodes one (a value whose ``repr`` waits on something), is not waited for, nor
        waited for again until it finishes one: the graph goes on, its work queued for the writer."""
        thread = self._thread
        if thread is None or thread is threading.current_thread() or self._stalled_at == self._taken:
            return
        taken, since = self._taken, time.monotonic()
        while not self._closed and thread.is_alive() and self._item_s * self._queue.qsize() > BACKLOG_MAX_S / 2:
            now = time.monotonic()
            if self._taken != taken:
                taken, since = self._taken, now  # the writer goes on: so does the wait
            elif now - since > (ENCODE_WAIT_S if self._encoding else self.lock_wait + CATCH_UP_STALL_S):
                self._stalled_at = taken
                return
            self._bell.set()
            time.sleep(min(0.05, max(self._item_s, 0.001)))

    def _run(self, work: Work) -> Batch | None:
        if self._rekey:
            with self._lock:
                runs, self._rekey = self._rekey, set()
            if self._on_rows_lost is not None:
                try:
                    self._on_rows_lost(runs)
                except Exception:  # noqa: BLE001 - the session's own fault path forces the keyframe too
                    pass
        try:
            return work()
        except (KeyboardInterrupt, SystemExit):
            if not self.background:
                raise  # sync mode runs on the graph's thread: Ctrl+C stops the program
            self._fault(RuntimeError("encoding was interrupted"), None, lost=True)
            return None
        except BaseException as exc:  # noqa: BLE001 - counted, never raised into the graph, never the end of the writer
            lost = _rows_of(work)
            if lost is not None:  # its run ends incomplete, with the rows it would have held counted
                self.unwritten.note(lost)
                self._encode_lost.append(lost)
            self._fault(exc, lost, lost=True)  # type: ignore[arg-type]
            return None

    def _with_ends(self, kept: Batch) -> None:
        """Steps lost to their encoding take their runs' ends (waiting in ``kept``) with their fault,
        so that the handler writes the fault on the end before it is written (under ``_lock``)."""
        for lost in self._encode_lost:
            ids = lost.run_ids()
            lost.runs_update.extend(u for u in kept.runs_update if u[0] in ids)
        self._encode_lost = []

    def _keep(self, batch: Batch) -> None:
        """Add rows to the kept batch (under ``_lock``); past the bound, drop its steps and calls.

        Rows are dropped only once a try of them failed (``_keep(Batch())``), or past twice the
        bound: a store that came back takes them, even a step larger than the bound, which would
        otherwise be dropped untried each time, the store taken as failing for good."""
        accumulating = bool(self._kept) or self._failing is not None
        before = bool(self._kept.steps or self._kept.calls or self._kept.calls_update)
        self._kept.merge(batch)
        if accumulating:  # the common case (nothing waiting) skips the sizing
            self._kept_bytes += _size(batch)
        if self._failing is not None:
            self._tell(batch)
        # Untried rows wait for one try (the retry is rung at once), up to twice the bound; past
        # it, for as long as a store takes to answer (a sync run's retry thread may not have been
        # scheduled yet: a store that came back takes them).
        now = time.monotonic()
        if not before:
            self._untried_since = now
        waited = now - self._untried_since > self.lock_wait + CATCH_UP_STALL_S
        tried = self._kept_tried or not batch or (before and waited and self._kept_bytes > 2 * self.keep_bytes)
        if self._kept_bytes > self.keep_bytes and tried:
            self._kept_tried = False
            kept = self._kept
            dropped = Batch(steps=kept.steps, calls=kept.calls, calls_update=kept.calls_update, blobs=kept.blobs)
            self.unwritten.note(dropped)
            self._rekey |= dropped.run_ids()
            self._kept = Batch(runs_new=kept.runs_new, runs_update=kept.runs_update)
            self._kept_bytes = _size(self._kept)
            why = f"{_rows(dropped)} rows dropped: more than {_mib(self.keep_bytes)} waited for the store ({_why(self._failing)})"
            # The runs' last updates ride along (not written here): a run that ended already carries the fault.
            ids = dropped.run_ids()
            self._fault(StoreError(why), Batch(steps=dropped.steps, calls=dropped.calls, runs_update=[u for u in self._kept.runs_update if u[0] in ids]), lost=True)

    def _write_kept(self, budget: float) -> bool:
        """Write every kept row in one transaction (caller holds ``_io``); ``True`` once nothing is kept."""
        with self._lock:
            if not self._kept:
                if self._failing is not None and self.store is not None and not self._gone:
                    self._failing = None  # what failed was dropped, nothing waits: the next rows try the store
                return True
            inflight, self._kept, self._kept_bytes = self._kept, Batch(), 0
            self._kept_tried = False  # rows kept from now on are not tried yet
            self._inflight = _rows(inflight)  # still waiting, for kept_rows, until this try ends
            again = self._failing is not None  # an earlier try may have committed without an answer
            budget = self._try_wait(budget)
        try:
            store = self._ensure_store()
            if store is None:
                raise self.open_error or StoreError("the store cannot be opened")
            gone = self._gone or self._file_gone()
            if gone:
                # Kept like any other fault (bounded by keep_bytes), never written there again:
                # at close they go to a rescue file, not into a deleted inode or someone else's file.
                self._gone = gone
                raise StoreError(gone)
            self._write(store, inflight, budget, again=again)
        except Exception as exc:  # noqa: BLE001 - kept and counted, never raised into the graph
            with self._lock:
                inflight.merge(self._kept)
                self._kept, self._kept_bytes = inflight, _size(inflight)
                first = self._failing is None
                self._failing = exc
                if first:
                    self._told = set()
                    self._tell(inflight)
                self._kept_tried = True
                if self._kept_bytes > self.keep_bytes:
                    self._keep(Batch())
            return False
        finally:
            self._inflight = 0  # the try is over: its rows are written, kept again or lost
        with self._lock:
            if self._failing is not None and not self._kept:
                _log.info("graphtape: the store takes writes again; every kept row is written")
                self._failing = None
                self._told = set()
            return not self._kept

    def _try_wait(self, budget: float) -> float:
        """How long a try may wait for a lock: ``budget``, or less while the store fails (``RETRY_LOCK_WAIT_S``)."""
        return min(budget, RETRY_LOCK_WAIT_S) if self._failing is not None else budget

    def _write(self, store: RunStore, batch: Batch, budget: float, *, again: bool = False) -> None:
        """Commit ``batch``, trying again while quick failures leave time in ``budget`` (a fresh connection each time)."""
        deadline = time.monotonic() + budget
        if hasattr(store, "write_wait"):
            # The store's own wait for a lock is the budget: a try never outlasts it (a busy
            # timeout longer than the budget made each try at close take the full lock_wait).
            store.write_wait = budget  # type: ignore[attr-defined]
        delay = 0.02
        if self._orphaned:
            self._leave_out_orphans(batch, ends=batch)
        self.unwritten.mark(batch)
        while True:
            try:
                store.write(batch, again=again)
                return
            except Exception as exc:  # noqa: BLE001
                again = True  # a connection lost at commit may have stored the batch
                if not is_passing(exc):
                    try:
                        self._write_apart(store, batch)
                        return
                    except Exception:
                        # A passing fault: the rows it had not reached are put back (``_put_back``),
                        # to be kept. A step it refused on the way may have left deltas among them.
                        if self._orphaned:
                            self._leave_out_orphans(batch, ends=batch)
                        raise
                # A store refusing writes (a read-only file, a role without the grant) will not
                # take them within the budget: the background retry keeps them, with its backoff.
                if is_read_only_error(exc) or time.monotonic() + delay >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def _write_apart(self, store: RunStore, batch: Batch) -> None:
        """A row the store refuses: write each run's rows apart, then row by row, dropping (and counting) only what is refused."""
        groups: dict[str, Batch] = {}
        call_run = {row["call_id"]: row["run_id"] for row in batch.calls}
        for row in batch.runs_new:
            groups.setdefault(row["id"], Batch()).runs_new.append(row)
        for row in batch.steps:
            groups.setdefault(row["run_id"], Batch()).steps.append(row)
        for row in batch.calls:
            groups.setdefault(row["run_id"], Batch()).calls.append(row)
        for item in batch.calls_update:
            groups.setdefault(call_run.get(item[0], ""), Batch()).calls_update.append(item)
        for item in batch.runs_update:
            groups.setdefault(item[0], Batch()).runs_update.append(item)
        pending = [Batch(blobs=batch.blobs)] if batch.blobs else []
        pending += list(groups.values())
        for i, group in enumerate(pending):
            self.unwritten.mark(group)
            try:
                store.write(group, again=True)
                continue
            except Exception as exc:  # noqa: BLE001
                if is_passing(exc):
                    _put_back(batch, pending[i:])
                    raise
            rows = _row_batches(group)
            refused_run = False
            left_out = Batch()  # deltas on a refused step, said in one fault before the run's end is written
            for k, row_batch in enumerate(rows):
                if refused_run and (row_batch.steps or row_batch.calls):
                    continue  # never a step or call without its run row (counted with the run row)
                if row_batch.steps and self._orphaned:
                    left_out.merge(self._take_orphans(row_batch))
                    if not row_batch:
                        continue
                if left_out and not row_batch.steps:
                    self._say_left_out(left_out, group)
                    left_out = Batch()
                self.unwritten.mark(row_batch)  # its steps refused before its end: the end says so
                try:
                    store.write(row_batch, again=True)
                except Exception as exc:  # noqa: BLE001
                    if is_duplicate(exc) and row_batch.runs_new:
                        continue  # a run row already there: the commit that wrote it lost its answer
                    if is_passing(exc):
                        _put_back(batch, rows[k:] + pending[i + 1 :])
                        raise
                    if row_batch.runs_new:
                        refused_run = True
                        lost = Batch(runs_new=row_batch.runs_new, steps=group.steps, calls=group.calls)
                        self._fault(exc, lost, lost=True)
                    else:
                        self.unwritten.note(row_batch)
                        with self._lock:
                            self._rekey |= row_batch.run_ids()
                        self._orphaned.update(_chain(row) for row in row_batch.steps if _has_state(row))
                        self._fault_on_ends(exc, Batch(steps=row_batch.steps, calls=row_batch.calls), group)
            if left_out:
                self._say_left_out(left_out, group)

    def _leave_out_orphans(self, batch: Batch, *, ends: Batch) -> None:
        """Take out of ``batch`` (in place) the deltas built on a state the store refused for good
        (``_take_orphans``), and say so on their runs' ends waiting in ``ends``. Caller holds ``_io``."""
        lost = self._take_orphans(batch)
        if lost:
            self._say_left_out(lost, ends)

    def _take_orphans(self, batch: Batch) -> Batch:
        """Take out of ``batch`` (in place) the deltas built on a state the store refused for good,
        up to the next keyframe of their namespace: stored, they would read as a state the graph
        never had. They are counted unwritten (their run ends ``incomplete``) and returned."""
        kept, left_out = [], []
        for row in batch.steps:
            chain = _chain(row)
            if chain in self._orphaned and _has_state(row):
                if not row["is_key"]:
                    left_out.append(row)
                    continue
                self._orphaned.discard(chain)
            kept.append(row)
        if not left_out:
            return Batch()
        batch.steps[:] = kept
        lost = Batch(steps=left_out)
        self.unwritten.note(lost)
        return lost

    def _say_left_out(self, lost: Batch, ends: Batch) -> None:
        """One fault for the deltas ``lost`` left out, on their runs' ends waiting in ``ends``."""
        steps = _counted(len(lost.steps), "step")
        self._fault_on_ends(StoreError(f"{steps} left out ({describe_rows(lost)}): each holds only what changed since a step the store refused"), lost, ends)

    def _fault_on_ends(self, exc: Exception, lost: Batch, written: Batch) -> None:
        """Rows of ``written`` lost while it is written: the ends of their runs waiting in it (built
        when the run ended, so too early to hold this fault) carry it. Handed over now, before
        those ends are written: the handler adds the fault to their fields in place."""
        ids = lost.run_ids()
        lost.runs_update.extend(u for u in written.runs_update if u[0] in ids)
        self._fault(exc, lost, lost=True)
        self._dispatch()

    def _tell(self, batch: Batch) -> None:
        """Count the episode's fault once for each run whose rows it holds back (under ``_lock``)."""
        new = batch.run_ids() - self._told
        if not new or self._failing is None:
            return
        self._told |= new
        for run_id in sorted(new):
            self._fault(self._failing, _only_runs(batch, {run_id}), lost=False)

    def _fault(self, exc: Exception, batch: Batch | None, *, lost: bool) -> None:
        with self._lock:
            self._faults.append((exc, batch, lost))
            if lost and batch is not None and (batch.steps or batch.calls):
                self._rekey |= batch.run_ids()  # their next frames start afresh, where work items run

    def _dispatch(self) -> None:
        """Hand the faults noted so far to ``on_fault`` (never under the writer's locks)."""
        while self._faults:
            with self._lock:
                faults, self._faults = self._faults, []
            for exc, batch, lost in faults:
                try:
                    self.on_fault(exc, batch, lost)
                except Exception:  # noqa: BLE001 - a fault handler never stops the writer
                    pass

    # -- internals: the store --------------------------------------------------
    def _adopt(self, store: RunStore) -> None:
        self.store = store
        self._file = _file_identity(store)
        if hasattr(store, "write_wait"):
            store.write_wait = self.lock_wait  # type: ignore[attr-defined]

    def _ensure_store(self) -> RunStore | None:
        if self.store is not None or self._opener is None:
            return self.store
        try:
            store = self._opener()
        except Exception as exc:  # noqa: BLE001 - kept trying; counted through the kept rows
            self.open_error = exc
            return None
        self._adopt(store)
        _log.info("graphtape: the store can be reached now; recording starts")
        return store

    def _file_gone(self) -> str | None:
        """Why the SQLite file being recorded into is no longer at its path, if it is not."""
        if self._file is None:
            return None
        path, ident = self._file
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return f"the database file {path} was deleted while recording; nothing more is written to it"
        except OSError:
            return None  # cannot tell: let SQLite say what is wrong
        if (st.st_dev, st.st_ino) != ident:
            return f"the database file {path} was replaced while recording; nothing more is written to it"
        return None

    # -- internals: threads ----------------------------------------------------
    def after_fork_in_child(self) -> None:
        """A forked child (gunicorn --preload, celery prefork, multiprocessing) has none of the
        parent's threads and shares its connections: what the parent queued or kept is the
        parent's to write; the child starts afresh, with locks and connections of its own, and
        its writer's thread starts with its first work."""
        self._hold_lock = threading.Lock()
        self._held = []
        self._lock = threading.RLock()
        self._io = threading.Lock()
        self._busy = threading.Lock()
        self._kept, self._kept_bytes, self._inflight, self._kept_tried = Batch(), 0, 0, False
        self._bounded = BoundedWrites()
        self.unwritten = UnwrittenRows()  # the parent's runs' losses are the parent's to mark
        self._rekey = set()
        self._orphaned = set()
        self._encode_lost = []
        self._faults = []
        self._bell = threading.Event()
        self._queued = 0
        self._queue = queue.SimpleQueue()
        self._thread = None
        forget = getattr(self.store, "forget_connections_after_fork", None)
        if forget is not None:
            try:
                forget()
            except Exception:  # noqa: BLE001 - the next write opens a connection or says why not
                pass

    def _restart_after_fork(self) -> None:
        with self._lock:
            if self._thread is None and not self._closed:
                self._start_thread(self._loop)

    def _start_thread(self, target: Callable[[], None]) -> None:
        self._thread = threading.Thread(target=target, name="graphtape-writer", daemon=True)
        self._thread.start()

    def _start_retry(self) -> None:
        """Sync mode: make sure a background thread retries the kept rows."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                if not self._closed:
                    self._start_thread(self._retry_loop)
        self._bell.set()

    def _retry_loop(self) -> None:
        delay = _RETRY_FIRST_S
        while not self._closed:
            self._bell.wait(delay)
            self._bell.clear()
            if self._closed:
                return
            with self._io:
                done = self._write_kept(self.lock_wait)
            self._dispatch()
            if done:
                with self._lock:
                    if not self._kept:
                        return
                delay = _RETRY_FIRST_S
            else:
                delay = min(delay * 2, _RETRY_MAX_S)

    def _loop(self) -> None:
        delay = _RETRY_FIRST_S
        while True:
            try:
                stop, ok = self._serve_one(delay if self._kept else None)
                if stop:
                    return
                delay = _RETRY_FIRST_S if ok else min(delay * 2, _RETRY_MAX_S)
            except BaseException as exc:  # noqa: BLE001 - the thread must outlive any one batch: later runs depend on it
                self._fault(exc, None, lost=True)  # type: ignore[arg-type]
                self._dispatch()

    def _serve_one(self, wait: float | None) -> tuple[bool, bool]:
        """Run and commit what is queued once the bell rings (or retry kept rows after ``wait``); ``(stop, written)``."""
        if not self.hold:  # ``exit`` mode has nothing to write before a run ends: it never wakes for nothing
            wait = BUSY_MAX_S if wait is None else min(wait, BUSY_MAX_S)
        self._bell.wait(wait)
        with self._busy:
            return self._serve_now()

    def _serve_now(self) -> tuple[bool, bool]:
        self._bell.clear()  # before taking items: a ring that comes while they are taken is kept
        self._queued = 0
        try:
            item = self._queue.get_nowait()
        except queue.Empty:
            item = _RETRY
        events: list[threading.Event] = []
        stop = False
        group = Batch()
        started = time.perf_counter()
        while item is not _RETRY:
            if item is None:
                stop = True
            elif isinstance(item, threading.Event):
                events.append(item)
            else:
                t0 = time.perf_counter()
                self._encoding = True
                try:
                    got = self._run(item)
                finally:
                    self._encoding = False
                    self._taken += 1
                self._item_s += (time.perf_counter() - t0 - self._item_s) * 0.2
                if got:
                    group.merge(got)
            if stop or events or len(group.steps) + len(group.calls) >= _MAX_GROUP or time.perf_counter() - started >= _GROUP_MAX_S:
                if not stop and not self._queue.empty():
                    self._bell.set()  # the next group goes on at once
                break
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
        try:
            if group:
                with self._lock:
                    self._keep(group)
                    if self._encode_lost:
                        self._with_ends(self._kept)
                if self._faults:
                    self._dispatch()  # before the write: the ends of runs that lost a step carry its fault
            ok = True
            if self._kept:
                # A store that fails is tried again on a backoff, not after each group of work:
                # the writer goes on encoding meanwhile (a graph may be waiting for it to catch up).
                # A flush or close (``events``, ``stop``) has it tried now.
                if self._failing is None or events or stop or time.monotonic() >= self._retry_at:
                    with self._io:
                        ok = self._write_kept(self.lock_wait)
                    self._backoff = _RETRY_FIRST_S if ok else min(self._backoff * 2, _RETRY_MAX_S)
                    self._retry_at = time.monotonic() + self._backoff
                else:
                    ok = False
        finally:
            self._dispatch()
            for e in events:
                e.set()
        return stop, ok


_RETRY = object()


def for_run(work: Work, run_id: str, *, steps: int = 0, calls: int = 0) -> Work:
    """Name the run, and the rows of it, that ``work`` encodes: if encoding them raises, the
    writer still knows whose they were, and that run ends ``incomplete`` with them counted."""
    work.rows_of = (run_id, steps, calls)  # type: ignore[attr-defined]
    return work


def _rows_of(work: Work) -> Batch | None:
    """Stand-in rows (each only its run id) for what a work item tagged by ``for_run`` would have written."""
    tag = getattr(work, "rows_of", None)
    if tag is None:
        return None
    run_id, steps, calls = tag
    return Batch(steps=[{"run_id": run_id} for _ in range(steps)], calls=[{"run_id": run_id} for _ in range(calls)])


def _only_runs(batch: Batch, ids: set[str]) -> Batch:
    """The rows of ``batch`` that belong to ``ids`` (what a fault message is about; not written)."""
    return Batch(
        runs_new=[r for r in batch.runs_new if r["id"] in ids],
        runs_update=[u for u in batch.runs_update if u[0] in ids],
        steps=[r for r in batch.steps if r["run_id"] in ids],
        calls=[r for r in batch.calls if r["run_id"] in ids],
    )


def _chain(row: dict) -> tuple[str, str]:
    """The frames a step row's state is a keyframe or a delta in: its run's, in its namespace."""
    return row["run_id"], row["ns"]


def _has_state(row: dict) -> bool:
    """Whether a step row holds a frame (a step that never checkpointed holds none)."""
    return not (row.get("flags") or 0) & FLAG_PENDING


def _row_batches(group: Batch) -> list[Batch]:
    """One batch per row, in the order a transaction applies them, the blobs with the first."""
    out = [Batch(runs_new=[r]) for r in group.runs_new]
    out += [Batch(steps=[r]) for r in group.steps]
    out += [Batch(calls=[r]) for r in group.calls]
    out += [Batch(calls_update=[u]) for u in group.calls_update]
    out += [Batch(runs_update=[u]) for u in group.runs_update]
    if group.blobs:
        out.insert(0, Batch(blobs=group.blobs))
    return out


def _put_back(batch: Batch, rest: list[Batch]) -> None:
    """Make ``batch`` hold only the rows of ``rest`` (what a passing fault interrupted), in order."""
    merged = Batch()
    for b in rest:
        merged.merge(b)
    batch.runs_new[:] = merged.runs_new
    batch.runs_update[:] = merged.runs_update
    batch.steps[:] = merged.steps
    batch.calls[:] = merged.calls
    batch.calls_update[:] = merged.calls_update
    batch.blobs.clear()
    batch.blobs.update(merged.blobs)


def _rows(batch: Batch) -> int:
    return len(batch.runs_new) + len(batch.runs_update) + len(batch.steps) + len(batch.calls) + len(batch.calls_update)


def _size(batch: Batch) -> int:
    """Roughly the bytes ``batch`` holds: payloads, blobs and the text of its rows."""
    n = sum(len(data) for _, data in batch.blobs.values())
    for rows in (batch.steps, batch.calls, batch.runs_new):
        for row in rows:
            for v in row.values():
                if isinstance(v, (bytes, str)):
                    n += len(v)
    return n + 200 * _rows(batch)


def _shown(url: str) -> str:
    """A store URL as a message may show it (no password)."""
    from graphtape.recorder.store.urls import shown_url

    try:
        return shown_url(url)
    except Exception:  # noqa: BLE001 - a message never fails on the URL
        return "the store"


def _counted(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def _mib(n: int) -> str:
    return f"{n / 2**20:.0f} MiB" if n >= 2**20 else f"{n} bytes"


def _why(exc: BaseException | None) -> str:
    if exc is None:
        return "the store did not take them"
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def _file_identity(store: RunStore) -> tuple[str, tuple[int, int]] | None:
    path = _sqlite_path(getattr(store, "url", ""))
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return str(path), (st.st_dev, st.st_ino)


_live_writers: weakref.WeakSet[Writer] = weakref.WeakSet()


def flush_writers_into(url: str, timeout: float = 5.0) -> None:
    """Wait for this process's recorders writing into store ``url`` to write what they hold: a
    replay asked for a run just recorded reads it whole (``last_run_id`` right after ``invoke``)."""
    for w in list(_live_writers):
        store = w.store
        if store is not None and getattr(store, "url", None) == url and not w._closed:
            try:
                w.flush(timeout)
            except Exception:  # noqa: BLE001 - a writer that cannot flush leaves the replay to say what it finds
                pass


# A fork waits (this long at most) for each writer's thread to finish what it is doing: a thread
# stopped by the fork halfway through encoding or writing can leave a lock of the regex engine,
# SQLite or the pool held in the child for good, and the child's writer would wait on it forever.
FORK_WAIT_S = 5.0
_paused: list[threading.Lock] = []


def _before_fork() -> None:
    for w in list(_live_writers):
        for lock in (w._busy, w._io):
            if lock.acquire(timeout=FORK_WAIT_S):
                _paused.append(lock)


def _after_fork_in_parent() -> None:
    while _paused:
        _paused.pop().release()


_forked = False  # this process is a fork of the one that imported graphtape


def in_forked_child() -> bool:
    """Whether this process was forked (a multiprocessing worker, a prefork pool's child): such a
    process often ends with ``os._exit``, which runs no exit hook, so nothing may wait for one.
    A multiprocessing worker that imported graphtape only after it started counts too."""
    if _forked:
        return True
    mp = sys.modules.get("multiprocessing")
    try:
        return mp is not None and mp.parent_process() is not None
    except Exception:  # noqa: BLE001 - an odd multiprocessing: taken as not a worker
        return False


def _after_fork_in_child() -> None:
    global _forked
    _forked = True
    _paused.clear()  # the child's writers get new locks
    for w in list(_live_writers):
        try:
            w.after_fork_in_child()
        except Exception:  # noqa: BLE001 - never fail the user's fork
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)


# SIGTERM (``docker stop``, systemd, Kubernetes, a supervisor) ends a Python program at once, with
# no exit hook: the runs it finished but the writer had not written yet would be lost. While the
# signal has its default meaning, graphtape's handler first writes what the background writers
# hold (at most SIGTERM_WAIT_S), then lets the signal end the program as it would have.
SIGTERM_WAIT_S = 5.0
_sigterm_installed = False


def _flush_on_sigterm() -> None:
    """Install ``_on_sigterm`` once, from the main thread, if SIGTERM still has its default meaning."""
    global _sigterm_installed
    if _sigterm_installed or threading.current_thread() is not threading.main_thread():
        return
    import signal

    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
            _sigterm_installed = True
    except (AttributeError, ValueError, OSError):  # no SIGTERM here, or not the interpreter's main thread
        pass


def _on_sigterm(signum: int, frame: object) -> None:
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the program at once
    deadline = time.monotonic() + SIGTERM_WAIT_S
    for w in list(_live_writers):
        try:
            w.flush_before_dying(max(0.0, deadline - time.monotonic()))
        except Exception:  # noqa: BLE001 - the signal ends the program whatever happens here
            pass
    os.kill(os.getpid(), signal.SIGTERM)


@atexit.register
def _flush_at_exit() -> None:
    for w in list(_live_writers):
        try:
            w.close(at_exit=True)
        except KeyboardInterrupt:
            # Ctrl-C while the last rows go in: the person wants out. Say what that costs, in
            # one line, not a traceback from graphtape's exit hook.
            sys.stderr.write("graphtape: stopped writing at exit (Ctrl-C): runs not written in full are shown as interrupted\n")
            return
        except Exception:  # noqa: BLE001 - never fail interpreter shutdown
            pass
