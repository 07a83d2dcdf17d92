"""Kill loop for ``test_sqlite_crash``: run in its own interpreter, print acknowledged appends.

``python crash_driver.py DB RUNS SEED`` (working directory: this folder) forks each child from a
forkserver that has already imported contextwright, lets it append for a random few milliseconds
after it says it is ready, kills it with SIGKILL, and finally prints every acknowledgement it
received as one JSON list of ``[run, batch, seqs]``. A separate interpreter, because under pytest
every forked child would re-import pytest (Python 3.11's forkserver cannot preload ``__main__``).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import sys
import time
from multiprocessing.connection import Connection
from typing import Any

from store_workers import crash_child

from contextwright.session import SessionKey

KEY = SessionKey(user_id="crash", session_id="loop")


def _drain(receiver: Connection) -> list[Any]:
    acks: list[Any] = []
    try:
        while receiver.poll():
            item = receiver.recv()
            if item != "ready":
                acks.append(item)
    except EOFError:
        pass
    receiver.close()
    return acks


def one_run(context: Any, path: str, run: int, rng: random.Random) -> list[Any]:
    receiver, sender = context.Pipe(duplex=False)
    child = context.Process(target=crash_child, args=(path, KEY, run, sender))
    child.start()
    sender.close()
    if not receiver.poll(30) or receiver.recv() != "ready":
        raise SystemExit("the child never became ready")
    time.sleep(rng.uniform(0.0, 0.04))
    os.kill(child.pid, signal.SIGKILL)
    child.join(timeout=30)
    if child.exitcode != -signal.SIGKILL:
        raise SystemExit(f"the child ended with {child.exitcode} before it was killed")
    return _drain(receiver)


def main() -> None:
    path, runs, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["store_workers"])
    rng = random.Random(seed)
    acks: list[Any] = []
    for run in range(runs):
        acks += one_run(context, path, run, rng)
    print(json.dumps(acks))


if __name__ == "__main__":
    main()
