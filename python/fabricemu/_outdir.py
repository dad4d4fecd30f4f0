"""Output folders: a run is written into a fresh temporary folder beside its target and moved into
place when it ends, under a lock, so that a folder only ever holds one whole run.

- The target is locked (``fcntl.flock`` on ``.<name>.lock`` beside it, removed at the end) for the
  whole run: a second run on the same folder fails at once with :class:`OutputFolderBusy`.
- The run writes into ``.<name>.tmp-XXXX`` beside the target. At the end (complete, or interrupted
  by Ctrl-C / SIGTERM with its partial outputs written) that folder replaces the target whole, so no
  file of an earlier run survives next to the new one. A run that fails leaves the target as it was.
- A target that exists, is not empty and is not a fabricemu run (no ``run.json``) is refused unless
  ``overwrite=True``. Temporary folders left by a killed run are removed by the next run under the
  lock.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Iterator, Optional, Sequence, Type

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no lock, the rest works
    fcntl = None  # type: ignore[assignment]

from .errors import OutputFolderBusy, Terminated

__all__ = ["RUN_MARKER", "OutputFolder", "OutputFolderBusy", "sigterm_as_interrupt"]

#: The file that makes a folder a fabricemu run's.
RUN_MARKER = "run.json"


def _lock_path(target: Path) -> Path:
    return target.parent / f".{target.name}.lock"


def _staging_prefix(target: Path) -> str:
    return f".{target.name}.tmp-"


class OutputFolder:
    """``with OutputFolder(target) as staging: ...write into staging...; folder.commit()``.

    ``staging`` is the fresh folder to write into; :meth:`commit` moves it into place (replacing an
    earlier run's folder whole). Leaving the block without a commit removes it. With ``stage=False``
    (a sweep's folder, which its runs fill one by one) nothing is staged: the target is locked,
    checked and created, and ``staging`` is the target itself.
    """

    def __init__(
        self,
        target: os.PathLike[str] | str,
        *,
        overwrite: bool = False,
        stage: bool = True,
        markers: Sequence[str] = (RUN_MARKER,),
        what: str = "fabricemu run",
    ) -> None:
        self.target = Path(target)
        self.overwrite = overwrite
        self.stage = stage
        self.markers = tuple(markers)
        self.what = what
        self.staging: Optional[Path] = None
        self._lock: Optional[IO[bytes]] = None
        self.committed = False

    # -- lock -----------------------------------------------------------------------------------

    def _acquire(self) -> None:
        self.target.parent.mkdir(parents=True, exist_ok=True)
        path = _lock_path(self.target)
        while True:
            handle = open(path, "a+b")  # noqa: SIM115 - held for the whole run
            if fcntl is None:
                break
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                raise OutputFolderBusy(
                    16,  # EBUSY
                    "another fabricemu run is writing into this output folder (locked by "
                    f"{path.name}); wait for it to end or choose another folder",
                    str(self.target),
                ) from None
            # The holder before us removes the lock file when it ends: make sure we locked the
            # file that is there now, not one just unlinked.
            try:
                if os.stat(path).st_ino == os.fstat(handle.fileno()).st_ino:
                    break
            except FileNotFoundError:
                pass
            handle.close()
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n".encode())
        handle.flush()
        self._lock = handle

    def _release(self) -> None:
        if self._lock is not None:
            # Unlink while still holding the lock (see _acquire), then unlock.
            with contextlib.suppress(OSError):
                os.unlink(_lock_path(self.target))
            if fcntl is not None:
                fcntl.flock(self._lock.fileno(), fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None

    # -- checks ---------------------------------------------------------------------------------

    def _check_target(self) -> None:
        t = self.target
        if t.exists() and not t.is_dir():
            raise FileExistsError(17, "the output folder is a file", str(t))
        if not t.is_dir() or self.overwrite:
            return
        if any((t / m).exists() for m in self.markers):
            return  # an earlier run's folder: replaced whole
        if any(True for _ in t.iterdir()):
            raise FileExistsError(
                17,
                f"the output folder is not empty and holds no {self.what} (no {' or '.join(self.markers)}); "
                "choose another folder or pass overwrite=True (--overwrite) to replace it",
                str(t),
            )

    def _remove_stale(self) -> None:
        """Temporary folders of runs that were killed (we hold the lock: none is in use)."""
        prefix = _staging_prefix(self.target)
        for p in self.target.parent.glob(f"{prefix}*"):
            shutil.rmtree(p, ignore_errors=True)

    # -- context --------------------------------------------------------------------------------

    def __enter__(self) -> Path:
        self._acquire()
        try:
            self._check_target()
            if not self.stage:
                self.target.mkdir(exist_ok=True)
                self.staging = self.target
                return self.target
            self._remove_stale()
            self.staging = Path(tempfile.mkdtemp(prefix=_staging_prefix(self.target), dir=self.target.parent))
            return self.staging
        except BaseException:
            self._release()
            raise

    def commit(self) -> Path:
        """Move the staged folder into place (replacing the target whole); returns the target."""
        if not self.stage or self.committed:
            return self.target
        assert self.staging is not None, "commit() inside the with block"
        old: Optional[Path] = None
        if self.target.exists():
            old = Path(tempfile.mkdtemp(prefix=_staging_prefix(self.target), dir=self.target.parent))
            os.rmdir(old)
            os.replace(self.target, old)
        os.replace(self.staging, self.target)
        self.committed = True
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return self.target

    def has_outputs(self) -> bool:
        """Whether the staged folder holds a run.json (complete, or partial after an interrupt)."""
        return self.staging is not None and (self.staging / RUN_MARKER).is_file()

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        error: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        try:
            if self.stage and not self.committed and self.staging is not None:
                shutil.rmtree(self.staging, ignore_errors=True)
        finally:
            self._release()


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(f"terminated by signal {signum} (SIGTERM)")


def treat_sigterm_as_interrupt() -> None:
    """From now on SIGTERM raises :class:`fabricemu.errors.Terminated` (the CLI calls this)."""
    signal.signal(signal.SIGTERM, _raise_terminated)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Inside the block SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``), so a run
    stops and writes its partial outputs as on Ctrl-C; only in the main thread, and only when
    SIGTERM has its default action (a handler the program installed is left alone)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_DFL:
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
