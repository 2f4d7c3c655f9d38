#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""evil_server.py PORTFILE: a "Redis server" whose every reply is an error
full of terminal control sequences (a window-title change, a bell, a colour,
a C1 CSI byte and bytes that are not UTF-8), to check that redlock never
prints what a server sent without escaping it.

Listens on a free port of 127.0.0.1, writes the port to PORTFILE (by
rename, so it appears at once), answers each RESP command of every
connection with that error, and exits after 60 s.
"""
import os
import selectors
import socket
import sys
import time

EVIL = b"-ERR \x1b]0;owned\x07\x1b[31mEVIL\x9b2J\xff\xfe\x7f\r\n"

srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(64)
srv.setblocking(False)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(srv.getsockname()[1]))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])

sel = selectors.DefaultSelector()
sel.register(srv, selectors.EVENT_READ)
buffers = {}


def commands(buf):
    """Counts the complete RESP commands (arrays of bulk strings) at the
    start of buf; returns (count, bytes consumed)."""
    n, pos = 0, 0
    while True:
        end = buf.find(b"\r\n", pos)
        if end < 0 or buf[pos:pos + 1] != b"*":
            return n, pos
        items, p = int(buf[pos + 1:end]), end + 2
        for _ in range(items):
            e = buf.find(b"\r\n", p)
            if e < 0 or buf[p:p + 1] != b"$":
                return n, pos
            p = e + 2 + int(buf[p + 1:e]) + 2
            if p > len(buf):
                return n, pos
        n, pos = n + 1, p


start = time.monotonic()
while time.monotonic() - start < 60:
    for key, _ in sel.select(timeout=0.5):
        s = key.fileobj
        if s is srv:
            conn, _ = srv.accept()
            conn.setblocking(False)
            sel.register(conn, selectors.EVENT_READ)
            buffers[conn] = b""
            continue
        try:
            data = s.recv(65536)
        except OSError:
            data = b""
        if not data:
            sel.unregister(s)
            buffers.pop(s, None)
            s.close()
            continue
        buffers[s] += data
        try:
            n, used = commands(buffers[s])
        except ValueError:
            n, used = 1, len(buffers[s])
        buffers[s] = buffers[s][used:]
        try:
            s.sendall(EVIL * n)
        except OSError:
            pass
