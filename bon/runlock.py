"""One writer per run folder: every command that writes a run folder holds its lock while it writes.

The lock is an ``fcntl.flock`` on ``.bon-writer.lock`` inside the folder, taken without waiting: a second
writer refuses at once (exit 2), naming the holder's PID and command, instead of paying for the same
judge calls twice and interleaving its accounting with the first's. The kernel releases the lock when
its holder dies, so a lock left by a killed process is simply taken over. Readers never take it, so
they never block. The file is removed by its holder on release (while still holding it; a writer that
then finds it has locked a removed file tries again), so a finished folder holds no trace of it.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import json
import os
import stat
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from bon.errors import BonError

LOCK_NAME = ".bon-writer.lock"


@contextmanager
def writer_lock(folder: Path, command: str) -> Iterator[None]:
    """Hold ``folder``'s writer lock for the ``with`` body; refuse (BonError) when another process holds it."""
    path = Path(folder) / LOCK_NAME
    fd = _acquire(path, command)
    try:
        yield
    finally:
        _release(path, fd)


@contextmanager
def target_lock(folder: Path, command: str) -> Iterator[None]:
    """The writer lock of a folder that a command creates whole (``bon merge --out``): a lock file beside it
    in its parent (``.NAME.bon-writer.lock``), so two such commands aiming at one folder that does not exist
    yet cannot both build it; the second refuses at once like any second writer."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    path = folder.parent / f".{folder.name}{LOCK_NAME}"
    fd = _acquire(path, command, where=folder)
    try:
        yield
    finally:
        _release(path, fd)


def holds_writer_lock(param: str, command: str) -> Callable:
    """A CLI command that writes the folder named by its ``param`` argument holds that folder's lock
    while it runs (a folder that does not exist yet is left to the command, which refuses or creates it)."""

    def wrap(func: Callable) -> Callable:
        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            folder = kwargs.get(param)
            if folder is None or not Path(folder).is_dir():
                return func(*args, **kwargs)
            with writer_lock(Path(folder), command):
                return func(*args, **kwargs)
        return run

    return wrap


def _acquire(path: Path, command: str, where: Path | None = None) -> int:
    """Take the lock at ``path`` (errors name ``where``, by default the folder holding it)."""
    where = path.parent if where is None else where
    for _ in range(20):  # another writer may remove the file between our open and our lock: open it again
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # a symbolic link: removed (never its target), then our own file
                path.unlink(missing_ok=True)
                continue
            what = "run folder is not writable" if exc.errno in (errno.EACCES, errno.EROFS, errno.EPERM) else \
                "cannot lock the run folder for writing"
            raise BonError(f"{where}: {what} ({exc.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise BonError(f"{where}: another bon process is writing this run folder ({holder}); "
                           "wait for it to finish, or use another folder") from None
        if not _own_lock_file(fd, path):
            os.close(fd)
            path.unlink(missing_ok=True)  # a hard link or a special file put there: only the name goes
            continue
        if _same_file(fd, path):
            os.ftruncate(fd, 0)
            os.write(fd, json.dumps({"pid": os.getpid(), "command": command, "since": time.time()}).encode())
            return fd
        os.close(fd)
    raise BonError(f"{path}: could not take the run folder's writer lock")


def _same_file(fd: int, path: Path) -> bool:
    try:
        return os.fstat(fd).st_ino == os.lstat(path).st_ino
    except FileNotFoundError:
        return False


def _own_lock_file(fd: int, path: Path) -> bool:
    """The lock is only ever written into a plain file with no other name (no hard link to a file elsewhere)."""
    info = os.fstat(fd)
    return stat.S_ISREG(info.st_mode) and info.st_nlink <= 1


def _holder(fd: int) -> str:
    """``pid N, `bon demo```: who holds the lock (its record is written right after it is taken)."""
    for _ in range(10):
        try:
            record = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
            return f"pid {int(record['pid'])}, `{record['command']}`"
        except (ValueError, KeyError, TypeError, OSError):
            time.sleep(0.02)
    return "pid unknown"


def _release(path: Path, fd: int) -> None:
    try:
        if _same_file(fd, path):
            path.unlink(missing_ok=True)
    finally:
        os.close(fd)
