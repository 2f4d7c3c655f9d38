#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""track.py BASE CMD [ARG...]: runs CMD as a child and records how it ended.

Writes the child's pid to BASE.pid, then "exit N" or "signal N" to
BASE.status (each file appears at once, by rename). The shell's $? cannot
tell "exited with 143" from "killed by SIGTERM"; this can. SIGINT is reset
to its default in the child: background jobs of a script ignore it.
"""
import os
import signal
import sys


def write(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + ".tmp", path)


base = sys.argv[1]
pid = os.fork()
if pid == 0:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.execvp(sys.argv[2], sys.argv[2:])
write(base + ".pid", str(pid))
_, st = os.waitpid(pid, 0)
if os.WIFEXITED(st):
    write(base + ".status", "exit %d" % os.WEXITSTATUS(st))
else:
    write(base + ".status", "signal %d" % os.WTERMSIG(st))
