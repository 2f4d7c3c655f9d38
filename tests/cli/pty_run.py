#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""pty_run.py OUT DELAY INPUT CMD [ARG...]: runs CMD on a pseudo-terminal.

CMD gets the terminal as stdin, stdout and stderr and leads its
foreground process group, as a job of an interactive shell does. INPUT
(if not empty) is typed after DELAY seconds. Everything CMD printed goes
to OUT; the exit status is CMD's (128+N if signal N killed it). CMD is
killed after 60 s.
"""
import os
import pty
import select
import sys
import time

out_path, delay, typed = sys.argv[1], float(sys.argv[2]), sys.argv[3].encode()
pid, fd = pty.fork()
if pid == 0:
    os.execvp(sys.argv[4], sys.argv[4:])
out, start = b"", time.monotonic()
while time.monotonic() - start < 60:
    if typed and time.monotonic() - start >= delay:
        os.write(fd, typed)
        typed = b""
    ready, _, _ = select.select([fd], [], [], 0.1)
    if ready:
        try:
            data = os.read(fd, 4096)
        except OSError:  # EIO: every process holding the terminal is gone
            break
        if not data:
            break
        out += data
else:
    os.kill(pid, 9)
_, st = os.waitpid(pid, 0)
with open(out_path, "wb") as f:
    f.write(out)
sys.exit(os.WEXITSTATUS(st) if os.WIFEXITED(st) else 128 + os.WTERMSIG(st))
