"""One rank of test_fault_phases.py, run as its own process so the test can signal it at a phase:
    fault_phase_rank.py UID RANK WORLD PHASE FAULT CULPRIT
FAULT: "sigint" (the test sends SIGINT to CULPRIT), "fork" (CULPRIT forks from a helper thread
at the phase; the child uses the inherited communicator, tears it down and exits), "raise" /
"exit" (CULPRIT's 10th iteration raises an uncaught ValueError / calls sys.exit(0)), or "none"
(the test stops the process hosting the root). PHASE: before_join, during_join, blocked_call,
large_call, between_calls (see test_fault_phases.py).

Prints "STAGE <name>" when it reaches a stage the test waits for, and ends with one line
"RESULT <json>": {"ok": ...} or the actorcc error it got {"type", "culprit", "msg"}. A
KeyboardInterrupt is left to Python (its traceback on stderr, exit status 1)."""
import json
import os
import signal
import sys
import threading
import time

import numpy as np

import actorcc
import reliability_workers

uid, rank, world, phase, fault, culprit = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4],
                                           sys.argv[5], int(sys.argv[6]))
TIMEOUT = float(os.environ.get("FAULT_PHASE_TIMEOUT", "20"))
JOIN_TIMEOUT = float(os.environ.get("FAULT_PHASE_JOIN_TIMEOUT", "20"))
N_SMALL = 1001          # odd: no route's block size divides it
N_LARGE = (16 << 20) // 4  # 16 MiB of float32: a call that moves data for many rounds
me_culprit = rank == culprit
# Ctrl-C as a user's terminal delivers it: Python turns SIGINT into KeyboardInterrupt only where it
# was not ignored when the interpreter started, and a test run launched in the background (an
# asynchronous shell command) hands its children SIGINT ignored.
signal.signal(signal.SIGINT, signal.default_int_handler)


def stage(name):
    print("STAGE " + name, flush=True)


def result(**kw):
    print("RESULT " + json.dumps(kw), flush=True)


class Forker:
    """CULPRIT's fork at the phase, from a helper thread while the main thread waits inside the
    library; the child reports on a pipe what its call did, then exits as a child would."""

    def __init__(self, delay):
        self.comm = None
        self.report = None
        self.pid = 0
        self.thread = threading.Thread(target=self._run, args=(delay,), daemon=True)
        self.thread.start()

    def _run(self, delay):
        time.sleep(delay)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            c = self.comm
            if c is None:  # forked inside the constructor: nothing to call; exit as a child does
                os.write(w, b"no communicator yet")
                os._exit(0)
            reliability_workers._child(c, "call", w)  # never returns
        os.close(w)
        self.pid = pid
        os.waitpid(pid, 0)
        self.report = os.read(r, 65536).decode()
        os.close(r)


forker = None
t0 = time.monotonic()
try:
    if phase == "before_join" and me_culprit:
        stage("waiting")  # the signal lands here, before the constructor
        time.sleep(60)
    if phase == "during_join":
        if me_culprit:
            if fault == "fork":
                forker = Forker(0.5)
        else:
            time.sleep(1.5)  # the culprit is waiting in the join meanwhile
        stage("joining")
    c = actorcc.Communicator(uid, rank, world, backend="cpu", timeout=TIMEOUT, join_timeout=JOIN_TIMEOUT)
    stage("joined")
    if forker is not None:
        forker.comm = c
    n = N_LARGE if phase == "large_call" else N_SMALL
    x = np.empty(n, np.float32)
    if phase == "blocked_call" and rank == 0:
        sys.stdin.readline()  # the test says when the culprit has been interrupted in its call
        t0 = time.monotonic()
    if phase == "large_call" and me_culprit and fault == "fork":
        forker = Forker(0.3)
        forker.comm = c
    # Every rank stops at the same call: the sum of everyone's "stop" votes rides in a second
    # all_reduce (fork: after 40 calls; root stopped: once the test has made FAULT_PHASE_DONE).
    done_file = os.environ.get("FAULT_PHASE_DONE", "")
    want = world * (world + 1) / 2
    vote = np.zeros(1, np.float32)
    calls = 0
    if fault == "sigint" and phase == "large_call":
        # Nothing runs in Python between the calls (no refill, no check: zeros sum to zeros), so
        # the signal lands inside a call, not in Python code between two.
        x.fill(0)
        c.all_reduce(x)
        stage("looping")
        while True:
            c.all_reduce(x)
    while True:
        x.fill(rank + 1)
        c.all_reduce(x)
        calls += 1
        if not (x == want).all():
            result(wrong=True, calls=calls, got=float(x[0]), want=want)
            sys.exit(3)
        if calls == 1:
            stage("looping")
        if phase == "between_calls":
            time.sleep(0.02)
        if me_culprit and calls == 10 and fault == "raise":
            raise ValueError("a bug in rank 1's training step")
        if me_culprit and calls == 10 and fault == "exit":
            sys.exit(0)
        vote[0] = (fault == "fork" and calls >= 40) or (bool(done_file) and os.path.exists(done_file))
        c.all_reduce(vote)
        if vote[0] > 0:
            break
    if forker is not None:
        forker.thread.join(15)
    c.close()
    result(ok=True, calls=calls, child=forker.report if forker else None, secs=time.monotonic() - t0)
except actorcc.Error as e:
    result(type=type(e).__name__, culprit=e.culprit, msg=str(e), secs=time.monotonic() - t0)
