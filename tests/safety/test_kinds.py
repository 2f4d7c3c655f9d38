#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The checker's rules for read-write locks and semaphores, on records made
up here: each case writes worker logs, runs checker.py on them and reads
its verdict, so a rule that stopped counting (or started counting what it
must not) fails here without a rig. The rules themselves: kinds.py."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
MS = 1_000_000


def hold(worker, name, ae_ms, end_ms, kind=None, token=0, acks=None, mode="lease"):
    """One H record: acquired at ae_ms, released at end_ms, its validity
    confirmed well past the release (so the release ends the section)."""
    ab, ae, rb = (ae_ms - 1) * MS, ae_ms * MS, end_ms * MS
    f = ["H", worker, name, 0, mode, ab, ae, token, rb + 500 * MS, rb, rb + MS, "REDLOCK_OK", 0,
         "REDLOCK_OK", 0, "GGGGG/GGGGG", ab]
    if acks is not None:
        f.append(acks)
    if kind is not None:
        f.append(kind)
    return " ".join(map(str, f))


def fail(worker, name, ab_ms, kind=None):
    f = ["F", worker, name, ab_ms * MS, (ab_ms + 100) * MS, 100, "REDLOCK_ETIMEOUT", ab_ms * MS]
    if kind is not None:
        f.append(kind)
    return " ".join(map(str, f))


def check(lines, nemesis="none"):
    """(exit status, summary fields, output) of checker.py on the records,
    each (worker, line) going to that worker's log."""
    with tempfile.TemporaryDirectory() as d:
        for worker, line in lines:
            with open(os.path.join(d, f"worker-{worker}.log"), "a") as fh:
                fh.write(line + "\n")
        p = subprocess.run([sys.executable, os.path.join(HERE, "checker.py"), "--nemesis",
                            nemesis, "--dir", d], capture_output=True, text=True, check=False)
    summary = [l for l in p.stdout.splitlines() if l.startswith("nemesis=")]
    if len(summary) != 1:
        raise AssertionError(f"no summary line: {p.stdout}{p.stderr}")
    fields = dict(kv.split("=", 1) for kv in summary[0].split())
    return p.returncode, fields, p.stdout


class ReadWrite(unittest.TestCase):
    def test_readers_may_overlap(self):
        rc, s, out = check([(1, hold(1, "n", 1000, 2000, "R")), (2, hold(2, "n", 1500, 2500, "R")),
                            (3, hold(3, "n", 3000, 3100, "W", token=7))])
        self.assertEqual((rc, s["violations"]), (0, "0"), out)
        self.assertIn("up to 2 readers at once", out)

    def test_writer_must_not_overlap_a_reader(self):
        rc, s, out = check([(1, hold(1, "n", 1000, 2000, "R")),
                            (2, hold(2, "n", 1900, 2500, "W", token=7))])
        self.assertEqual((rc, s["violations"]), (1, "1"), out)
        self.assertIn("OVERLAP on n", out)

    def test_reader_inside_a_write_hold(self):
        rc, s, out = check([(1, hold(1, "n", 1000, 3000, "W", token=7)),
                            (2, hold(2, "n", 1500, 1600, "R")), (3, hold(3, "n", 1700, 1800, "R"))])
        self.assertEqual((rc, s["violations"]), (1, "2"), out)

    def test_writers_must_not_overlap(self):
        rc, s, out = check([(1, hold(1, "n", 1000, 2000, "W", token=7)),
                            (2, hold(2, "n", 1999, 2500, "W", token=8))])
        self.assertEqual((rc, s["violations"]), (1, "1"), out)

    def test_other_names_and_touching_sections_do_not_count(self):
        rc, s, out = check([(1, hold(1, "n", 1000, 2000, "W", token=7)),
                            (2, hold(2, "m", 1500, 2500, "W", token=3)),
                            (3, hold(3, "n", 2000, 2100, "R"))])
        self.assertEqual((rc, s["violations"]), (0, "0"), out)

    def test_write_holds_need_tokens_read_holds_do_not(self):
        rc, _, out = check([(1, hold(1, "n", 1000, 1100, "R")), (2, hold(2, "n", 1200, 1300, "W"))])
        self.assertEqual(rc, 1, out)
        self.assertIn("1 holds without a fencing token", out)

    def test_a_case_needs_both_sides(self):
        rc, _, out = check([(1, hold(1, "n", 1000, 1100, "R"))], nemesis="rw_freeze")
        self.assertEqual(rc, 1, out)
        self.assertIn("read-write rule was not exercised", out)


class Semaphore(unittest.TestCase):
    def test_k_permits_at_once_are_allowed(self):
        rc, s, out = check([(1, hold(1, "s", 1000, 2000, "P2")), (2, hold(2, "s", 1500, 2500, "P2")),
                            (3, hold(3, "s", 2000, 2200, "P2"))], nemesis="sem_freeze")
        self.assertEqual((rc, s["violations"]), (0, "0"), out)
        self.assertIn("up to 2 at once", out)

    def test_more_than_k_is_a_violation(self):
        rc, s, out = check([(1, hold(1, "s", 1000, 2000, "P2")), (2, hold(2, "s", 1500, 2500, "P2")),
                            (3, hold(3, "s", 1900, 2200, "P2")), (4, hold(4, "t", 1900, 2200, "P2"))])
        self.assertEqual((rc, s["violations"]), (1, "1"), out)
        self.assertIn("OVER LIMIT on s: 3 permits of 2", out)

    def test_limit_one_is_mutual_exclusion(self):
        rc, s, out = check([(1, hold(1, "s", 1000, 2000, "P1")), (2, hold(2, "s", 1500, 2500, "P1"))])
        self.assertEqual((rc, s["violations"]), (1, "1"), out)

    def test_a_case_needs_permits(self):
        rc, _, out = check([(1, hold(1, "n", 1000, 1100, token=3))], nemesis="sem_kill_aof")
        self.assertEqual(rc, 1, out)
        self.assertIn("semaphore rule was not exercised", out)


class Records(unittest.TestCase):
    def test_plain_lock_records_keep_their_rule(self):
        rc, s, out = check([(1, hold(1, "n", 1000, 2000, token=3)),
                            (2, hold(2, "n", 1500, 2500, token=4))])
        self.assertEqual((rc, s["violations"]), (1, "1"), out)

    def test_kind_after_acks_and_on_failures(self):
        rc, s, out = check([(1, hold(1, "n", 1000, 2000, "R", acks="1,1,-,0,1")),
                            (2, hold(2, "n", 1500, 2500, "R", acks="-")),
                            (3, fail(3, "n", 1200, "W")), (4, fail(4, "n", 1300, "R"))])
        self.assertEqual((rc, s["violations"], s["acquisitions"]), (0, "0", "2"), out)
        self.assertIn("failed attempts: 1 read, 1 write", out)
        self.assertNotIn("malformed", out)


if __name__ == "__main__":
    unittest.main()
