#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""The checker's rules for read-write locks, fair locks and semaphores, on
records made up here: each case writes worker logs, runs checker.py on them
and reads its verdict, so a rule that stopped counting (or started counting
what it must not) fails here without a rig. The rules themselves: kinds.py."""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
MS = 1_000_000


def hold(worker, name, ae_ms, end_ms, kind=None, token=0, acks=None, mode="lease", ab_ms=None):
    """One H record: acquired at ae_ms (the call begun at ab_ms, 1 ms before
    unless given), released at end_ms, its validity confirmed well past the
    release (so the release ends the section)."""
    ab = (ae_ms - 1 if ab_ms is None else ab_ms) * MS
    ae, rb = ae_ms * MS, end_ms * MS
    f = ["H", worker, name, 0, mode, ab, ae, token, rb + 500 * MS, rb, rb + MS, "REDLOCK_OK", 0,
         "REDLOCK_OK", 0, "GGGGG/GGGGG", ab]
    if acks is not None:
        f.append(acks)
    if kind is not None:
        f.append(kind)
    return " ".join(map(str, f))


def fail(worker, name, ab_ms, kind=None, wait_ms=100, took_ms=100):
    """One F record: an attempt begun at ab_ms with a wait of wait_ms that
    returned took_ms later."""
    f = ["F", worker, name, ab_ms * MS, (ab_ms + took_ms) * MS, wait_ms, "REDLOCK_ETIMEOUT",
         ab_ms * MS]
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


class Fair(unittest.TestCase):
    """A fair hold is a plain hold: the plain lock's rules, unchanged."""

    def test_fair_holds_must_not_overlap(self):
        rc, s, out = check([(1, hold(1, "f", 1000, 2000, "F", token=7)),
                            (2, hold(2, "f", 1999, 2500, "F", token=8))], nemesis="fair_freeze")
        self.assertEqual((rc, s["violations"]), (1, "1"), out)
        self.assertIn("OVERLAP on f", out)

    def test_a_fair_hold_excludes_a_plain_one(self):
        rc, s, out = check([(1, hold(1, "f", 1000, 2000, "F", token=7)),
                            (2, hold(2, "f", 1500, 2500, token=8))])
        self.assertEqual((rc, s["violations"]), (1, "1"), out)

    def test_tokens_must_rise(self):
        rc, s, out = check([(1, hold(1, "f", 1000, 1100, "F", token=9)),
                            (2, hold(2, "f", 1200, 1300, "F", token=9)),
                            (3, hold(3, "f", 1400, 1500, "F", token=8))], nemesis="fair_freeze")
        self.assertEqual((rc, s["violations"], s["token_decreases"]), (1, "0", "2"), out)
        self.assertIn("TOKEN DECREASE on f", out)

    def test_fair_holds_need_tokens(self):
        rc, _, out = check([(1, hold(1, "f", 1000, 1100, "F", token=3)),
                            (2, hold(2, "f", 1200, 1300, "F"))], nemesis="fair_freeze")
        self.assertEqual(rc, 1, out)
        self.assertIn("1 holds without a fencing token", out)

    def test_served_in_turn_passes_and_is_reported(self):
        rc, s, out = check([(1, hold(1, "f", 1000, 1100, "F", token=3)),
                            (2, hold(2, "f", 1200, 1300, "F", token=4)),
                            (2, hold(2, "f", 1400, 1500, "F", token=5)),
                            (3, fail(3, "f", 1600, "F"))], nemesis="fair_kill_aof")
        self.assertEqual((rc, s["violations"], s["acquisitions"]), (0, "0", "3"), out)
        self.assertIn("acquisitions per worker max 2 (worker 2), min 0 (worker 3) over 3 workers",
                      out)
        self.assertIn("availability per worker 0.000..1.000", out)
        self.assertIn("of 4 attempts, overtaken by a later one granted while they waited: "
                      "0 begun > 100 ms later, 0 begun > 300 ms later", out)

    def test_a_later_arrival_granted_first_is_counted(self):
        # On f, worker 1 waits 1000..1900 ms; worker 2 begins 200 ms after
        # it and is granted at 1301: overtaken at the 100 ms margin only.
        # Worker 3 begins 50 ms after worker 1, too soon to tell who queued
        # first. On g, worker 5 waits 1000..1900 and worker 4, begun 350 ms
        # after it, is granted at 1601: overtaken at both margins.
        rc, s, out = check([(1, hold(1, "f", 1900, 2000, "F", token=5, ab_ms=1000)),
                            (2, hold(2, "f", 1301, 1340, "F", token=4, ab_ms=1200)),
                            (3, hold(3, "f", 1201, 1250, "F", token=3, ab_ms=1050)),
                            (5, hold(5, "g", 1900, 2000, "F", token=5, ab_ms=1000)),
                            (4, hold(4, "g", 1601, 1640, "F", token=4, ab_ms=1350))],
                           nemesis="fair_freeze")
        self.assertEqual((rc, s["violations"]), (0, "0"), out)
        self.assertIn("of 5 attempts, overtaken by a later one granted while they waited: "
                      "2 begun > 100 ms later, 1 begun > 300 ms later", out)

    def test_a_waiter_past_its_deadline_is_not_overtaken(self):
        # Worker 1 waits 200 ms from 1000 but returns only at 1500 (its
        # last try overran under a freeze); worker 2, begun at 1350, after
        # that deadline, is not counted; worker 3, begun at 1150 and
        # granted at 1190, within it, is.
        rc, s, out = check([(1, fail(1, "f", 1000, "F", wait_ms=200, took_ms=500)),
                            (2, hold(2, "f", 1401, 1450, "F", token=4, ab_ms=1350))],
                           nemesis="fair_freeze")
        self.assertEqual(rc, 0, out)
        self.assertIn("of 2 attempts, overtaken by a later one granted while they waited: "
                      "0 begun > 100 ms later", out)
        rc, s, out = check([(1, fail(1, "f", 1000, "F", wait_ms=200, took_ms=500)),
                            (3, hold(3, "f", 1190, 1250, "F", token=4, ab_ms=1150))],
                           nemesis="fair_freeze")
        self.assertIn("of 2 attempts, overtaken by a later one granted while they waited: "
                      "1 begun > 100 ms later", out)

    def test_a_case_needs_fair_holds(self):
        rc, _, out = check([(1, hold(1, "n", 1000, 1100, token=3))], nemesis="fair_freeze")
        self.assertEqual(rc, 1, out)
        self.assertIn("fair lock was not exercised", out)


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
