#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Safety checker: reads the records of one harness run and judges them.

Inputs (all times are CLOCK_MONOTONIC nanoseconds of the test machine):
  worker-*.log   records written by safety_worker (see worker.c)
  nemesis.log    "<t> <event> <args...>" written by run.sh
  storage.final  "<name> <fence_token> <value>" read from the storage node

A hold's critical section is [ae, min(rb, vend)]: from the moment acquire
returned to the moment the worker stopped acting (before unlock) or its
own claimed validity ran out, whichever came first. Two critical sections
of one name that overlap are a violation of mutual exclusion, unless both
are read holds of a read-write lock (a fair lock's holds are the plain
lock's); permits of a semaphore of K violate it when more than K are open
at once (kinds.py).

Prints detail lines starting with "#" and, last, one summary line. Exits 1
when a safety property fails (for the unsafe-by-design case: never because
of the expected violation), 0 otherwise.
"""
import argparse
import glob
import heapq
import os
import sys
from collections import defaultdict

import kinds

NS_PER_MS = 1_000_000
# vend is recorded with millisecond resolution and never overstated.
VEND_RESOLUTION_NS = 2 * NS_PER_MS


class Hold:
    __slots__ = ("worker", "name", "seq", "mode", "ab", "ae", "token", "vend", "rb",
                 "re", "unlock", "lost_ns", "lost_reason", "writes", "members", "want", "acks",
                 "kind")

    def __init__(self, f, kind="M"):
        # M the plain lock; R, W a read or write hold; F a fair lock's
        # hold; P<K> a permit.
        self.kind = kind
        self.worker = int(f[1])
        self.name = f[2]
        self.seq = int(f[3])
        self.mode = f[4]
        self.ab, self.ae = int(f[5]), int(f[6])
        self.token = int(f[7])
        self.vend = int(f[8])
        self.rb, self.re = int(f[9]), int(f[10])
        self.unlock = f[11]
        self.lost_ns = int(f[12])
        self.lost_reason = f[13]
        self.writes = int(f[14])
        self.members = f[15] if len(f) > 15 else "?"
        # When the worker began wanting the name (older records: ab).
        self.want = int(f[16]) if len(f) > 16 else self.ab
        # Replicas that acknowledged each member's grant, "1,-,1" (only
        # with --replica-acks; None otherwise).
        self.acks = f[17] if len(f) > 17 else None

    def granted_by(self, member):
        """Whether member (0-based) granted this hold's acquire."""
        part = self.members.split("/")[0]
        return member < len(part) and part[member] == "G"

    @property
    def end(self):
        """When the worker stopped being entitled to act."""
        return min(self.rb, self.vend) if self.vend > 0 else self.ae

    def __repr__(self):
        kind = "" if self.kind == "M" else f", {self.kind}"
        return (f"worker {self.worker} seq {self.seq} ({self.mode}{kind}) "
                f"[{fmt_t(self.ae)}, {fmt_t(self.end)}] token {self.token} members {self.members}")


T0 = 0


def fmt_t(t):
    return f"{(t - T0) / 1e9:.3f}s"


def split_lines(path, min_fields):
    """The whitespace-split lines of an optional file with at least
    min_fields fields; nothing if the file is absent."""
    if not os.path.exists(path):
        return
    with open(path) as fh:
        for line in fh:
            f = line.split()
            if len(f) >= min_fields:
                yield f


def load(path):
    holds, fails, writes, samples, totals, errors = [], [], [], [], {}, []
    still = []  # (worker, name, want, t): wanted when the run ended
    for fn in sorted(glob.glob(os.path.join(path, "worker-*.log"))):
        with open(fn) as fh:
            for line in fh:
                f = line.split()
                if not f:
                    continue
                try:
                    kind = f[0]
                    if kind == "H":
                        hk, f = kinds.split_kind(f, 15)
                    elif kind == "F":
                        hk, f = kinds.split_kind(f, 7)
                    if kind == "H" and len(f) in (15, 16, 17, 18):
                        holds.append(Hold(f, hk))
                    elif kind == "F" and len(f) in (7, 8):
                        # (worker, name, ab, ae, wait_ms, rc, want, kind)
                        fails.append((int(f[1]), f[2], int(f[3]), int(f[4]), int(f[5]), f[6],
                                      int(f[7]) if len(f) > 7 else int(f[3]), hk))
                    elif kind == "A" and len(f) == 5:
                        still.append((int(f[1]), f[2], int(f[3]), int(f[4])))
                    elif kind == "W" and len(f) == 9:
                        writes.append(dict(worker=int(f[1]), name=f[2], seq=int(f[3]),
                                           wb=int(f[4]), we=int(f[5]), token=int(f[6]),
                                           rc=f[7], in_validity=f[8] == "1"))
                    elif kind == "R" and len(f) == 6:
                        samples.append((int(f[1]), int(f[2]), int(f[3]), int(f[4]), int(f[5])))
                    elif kind == "S" and len(f) == 7:
                        totals[int(f[1])] = dict(cycles=int(f[2]), attempts=int(f[3]),
                                                 acquired=int(f[4]), lost=int(f[5]),
                                                 asan=f[6] == "1")
                    elif kind == "E":
                        errors.append(line.strip())
                    else:
                        errors.append("malformed record: " + line.strip())
                except ValueError:
                    errors.append("malformed record: " + line.strip())
    events = [(int(f[0]), f[1], f[2:])
              for f in split_lines(os.path.join(path, "nemesis.log"), 2)]
    final = {f[0]: (int(f[1]), f[2])
             for f in split_lines(os.path.join(path, "storage.final"), 3)}
    return holds, fails, writes, samples, totals, errors, events, final, still


def overlaps(holds):
    """Pairs of holds of one name whose critical sections overlap, where the
    kinds exclude each other (all but two read holds; permits: kinds.py)."""
    return [(o, h) for seq in kinds.sweep(holds).values()
            for h, open_ in seq for o in open_ if kinds.exclusive_pair(o, h)]


def union(intervals):
    out = []
    for a, b in sorted(intervals):
        if b <= a:
            continue
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def longest_gap_ns(holds, fails):
    """Longest stretch with someone waiting for a name (in any attempt, one
    given up included) and nobody holding it (from acquire's return to
    unlock's return)."""
    held, waiting = defaultdict(list), defaultdict(list)
    for h in holds:
        held[h.name].append((h.ae, h.re))
        waiting[h.name].append((h.ab, h.ae))
    for f in fails:
        waiting[f[1]].append((f[2], f[3]))
    return max((b - a for name, w in waiting.items()
                for a, b in uncovered(union(w), union(held[name]))), default=0)


def uncovered(wait, held):
    """The stretches of the union of wait not covered by the union held
    (both lists of [a, b] as union() returns them)."""
    out, k = [], 0
    for a, b in wait:
        cur = a
        while k < len(held) and held[k][1] <= cur:
            k += 1
        j = k
        while cur < b:
            if j < len(held) and held[j][0] < b:
                if held[j][0] > cur:
                    out.append((cur, held[j][0]))
                cur = max(cur, held[j][1])
                j += 1
            else:
                out.append((cur, b))
                break
    return out


def lockouts(holds, still):
    """Every stretch in which someone was waiting for a name, in an attempt
    chain that later got it (or was still going when the run ended), while
    nobody held it: [(start, end, name)]. A hold counts from acquire's
    return to the end of its critical section; a wait from the start of the
    first of the worker's consecutive attempts on the name (want) to the
    return of the one that got it. Waits given up (a failed attempt
    followed by one on another name) do not count: longest_gap_ms has them."""
    held, waiting = defaultdict(list), defaultdict(list)
    for h in holds:
        held[h.name].append((h.ae, h.end))
        waiting[h.name].append((h.want, h.ae))
    for (_, name, want, t) in still:
        waiting[name].append((want, t))
    out = []
    for name, w in waiting.items():
        out += [(a, b, name) for a, b in uncovered(union(w), union(held[name]))]
    return sorted(out)


def overlap_ns(a, b, intervals):
    return sum(max(0, min(b, y) - max(a, x)) for x, y in intervals)


def report_lockouts(nemesis, outs, events):
    """Detail lines: the longest lockout, and for the nemeses that freeze a
    majority, how far lockouts reach beyond the freeze and how long after
    each thaw the waiters got the lock.

    No case fails on these. The target beyond a freeze is one node timeout
    plus the retry delay (150 ms for the workers' defaults); aof_freeze
    measured 77-183 ms from the start of the thaw commands in 8 runs on a
    2-core machine, 25-55 ms from the first one returning: the rig's own
    commands take 50-150 ms under load, so a bound near the target would
    fail on the machine, not the library. A looser bound that only catches
    "waited for the lease" (5 s) would not be clean either: a release
    queued behind others in a worker's background goes out only at the
    library's next back-off try, up to 4.8 s after the thaw (bench/failover,
    failover_thaw_lockout)."""
    if not outs:
        print("# lockout: nobody waited for a free lock")
        return
    a, b, name = max(outs, key=lambda o: o[1] - o[0])
    print(f"# lockout: longest {(b - a) / 1e6:.0f} ms on {name} at {fmt_t(a)}..{fmt_t(b)}; "
          f"{len(outs)} stretches, {sum(1 for o in outs if o[1] - o[0] > 100 * NS_PER_MS)} "
          f"over 100 ms")
    if nemesis not in ("freeze3", "aof_freeze"):
        return
    # Majority frozen: from when the last of the 3 SIGSTOPs was sent (at
    # most freeze_done) to when the first SIGCONT was (at least thaw_begin).
    # The interval is thus never overstated, nor is a lockout's part
    # beyond it understated.
    frozen = [(x, y) for (x, y, args) in windows(events, "freeze_done", "thaw_begin")
              if len(args) >= 3]
    # (thaw_begin, the first "thawed" event): the first SIGCONT was sent
    # between the two (run.sh logs "thawed" right after each node's thaw
    # command returned; older logs have no such event: None).
    thaws = []
    for (x, y, args) in windows(events, "thaw_begin", "thaw_done"):
        if len(args) >= 3:
            first = min((t for t, ev, _ in events if ev == "thawed" and x <= t <= y),
                        default=None)
            thaws.append((x, first))
    if not frozen:
        return
    beyond = [((o[1] - o[0]) - overlap_ns(o[0], o[1], frozen), o) for o in outs]
    worst, (a, b, name) = max(beyond, key=lambda x: x[0])
    print(f"# lockout beyond a majority freeze: longest {worst / 1e6:.0f} ms "
          f"(on {name} at {fmt_t(a)}..{fmt_t(b)}, {(b - a) / 1e6:.0f} ms in all)")
    # After each thaw: from thaw_begin until the waiters of each name that
    # was free and wanted at that moment held it again.
    after = []
    for (tb, t1) in thaws:
        for (a, b, name) in outs:
            if a <= tb < b:
                after.append((b - tb, None if t1 is None else b - t1, name, tb))
    if after:
        after.sort()
        vals = [x[0] / 1e6 for x in after]
        firsts = sorted(x[1] / 1e6 for x in after if x[1] is not None)
        worst = after[-1]
        line = (f"# lockout after a thaw (next hold of a name wanted and free at the thaw; "
                f"{len(after)} such): from the thaw command, median {vals[len(vals) // 2]:.0f} ms, "
                f"max {vals[-1]:.0f} ms ({worst[2]} at {fmt_t(worst[3])})")
        if firsts:
            line += (f"; from the first node's thaw command returning, median "
                     f"{firsts[len(firsts) // 2]:.0f} ms, max {firsts[-1]:.0f} ms")
        print(line)
    else:
        print("# lockout after a thaw: no name was free and wanted at a thaw")


def token_decreases(holds):
    """Holds whose token is not above that of a hold acquired before they began."""
    bad = []
    by_name = defaultdict(list)
    for h in holds:
        # Read holds and permits carry no token.
        if h.kind in kinds.FENCED:
            by_name[h.name].append(h)
    for hs in by_name.values():
        by_end = sorted(hs, key=lambda h: h.ae)
        k, best, best_h = 0, 0, None
        for h in sorted(hs, key=lambda h: h.ab):
            while k < len(by_end) and by_end[k].ae < h.ab:
                if by_end[k].token > best:
                    best, best_h = by_end[k].token, by_end[k]
                k += 1
            if h.token <= best:
                bad.append((best_h, h))
    return bad


def storage_checks(writes, final):
    """The storage never accepts a token below one it accepted earlier; every
    rejection is justified by an earlier higher accepted token; the final
    state is the highest accepted write."""
    regressions, unjustified, final_bad = [], [], []
    by_name = defaultdict(list)
    for w in writes:
        by_name[w["name"]].append(w)
    for name, ws in by_name.items():
        acc = [w for w in ws if w["rc"] == "REDLOCK_OK"]
        by_end = sorted(acc, key=lambda w: w["we"])
        k, best = 0, 0
        for w in sorted(acc, key=lambda w: w["wb"]):
            while k < len(by_end) and by_end[k]["we"] < w["wb"]:
                best = max(best, by_end[k]["token"])
                k += 1
            if w["token"] < best:
                regressions.append(w)
        by_begin = sorted(acc, key=lambda w: w["wb"])
        for r in (w for w in ws if w["rc"] == "REDLOCK_ESTALE_TOKEN"):
            if not any(a["wb"] < r["we"] and a["token"] > r["token"] for a in by_begin):
                unjustified.append(r)
        if acc:
            top = max(w["token"] for w in acc)
            tok, value = final.get(name, (None, ""))
            vtok = value.split(":")[-1] if value else ""
            if tok != top or vtok != str(top):
                final_bad.append((name, top, tok, value))
    return regressions, unjustified, final_bad


def windows(events, begin, end):
    """[(t_begin, t_end, args)] for paired nemesis events."""
    out, open_ = [], None
    for t, ev, args in events:
        if ev == begin:
            open_ = (t, args)
        elif ev == end and open_ is not None:
            out.append((open_[0], t, open_[1]))
            open_ = None
    return out


def check_freeze3(nemesis, holds, fails, events, problems):
    frozen = [(a, b) for (a, b, args) in windows(events, "freeze_done", "thaw_begin")
              if len(args) >= 3]
    inside = [h for h in holds if any(a < h.ab and h.ae < b for a, b in frozen)]
    for h in inside:
        problems.append(f"acquired while a majority was frozen: {h}")
    slow = [f for f in fails if any(a < f[2] < b for a, b in frozen)
            and f[3] - f[2] > (f[4] + 2000) * NS_PER_MS]
    for f in slow[:5]:
        problems.append(f"attempt by worker {f[0]} took {(f[3] - f[2]) / 1e6:.0f} ms "
                        f"for a wait of {f[4]} ms while a majority was frozen")
    failed_inside = sum(1 for f in fails if any(a < f[2] and f[3] < b for a, b in frozen))
    print(f"# {nemesis}: {len(frozen)} majority freezes, {failed_inside} attempts failed inside "
          f"them, {len(inside)} succeeded inside them, {len(slow)} overran their wait by > 2 s")


def check_pause(holds, writes, events, problems):
    pauses = {a[0]: t for t, ev, a in events if ev == "pause"}
    resumes = {a[0]: t for t, ev, a in events if ev == "resume"}
    if not pauses:
        problems.append("no holder was paused (the victim never got the lock)")
    for vid, tp in sorted(pauses.items()):
        tr = resumes.get(vid)
        vh = [h for h in holds if h.worker == int(vid)]
        if tr is None or not vh:
            problems.append(f"victim {vid}: no resume or no hold record")
            continue
        h = vh[0]
        nxt = sorted((o for o in holds if o.name == h.name and o.worker != h.worker
                      and tp <= o.ae <= tr), key=lambda o: o.ae)
        stale = [w for w in writes if w["worker"] == h.worker and w["wb"] > tr]
        rejected = [w for w in stale if w["rc"] == "REDLOCK_ESTALE_TOKEN"]
        accepted = [w for w in stale if w["rc"] == "REDLOCK_OK"]
        line = (f"# pause_holder: victim {vid} held {h.name} with token {h.token}, "
                f"validity to {fmt_t(h.vend)}, paused {fmt_t(tp)}..{fmt_t(tr)}; ")
        if nxt:
            line += (f"next holder worker {nxt[0].worker} acquired at {fmt_t(nxt[0].ae)} "
                     f"({(nxt[0].ae - h.vend) / 1e6:.0f} ms after the victim's validity ended) "
                     f"with token {nxt[0].token}; ")
        line += (f"victim learned of the loss at {fmt_t(h.lost_ns) if h.lost_ns else 'never'} "
                 f"({h.lost_reason}), unlock {h.unlock}; writes after resume: "
                 f"{len(rejected)} rejected as stale, {len(accepted)} accepted")
        print(line)
        if not nxt:
            problems.append(f"victim {vid}: nobody else acquired {h.name} during the pause")
        elif nxt[0].ae < h.vend:
            problems.append(f"victim {vid}: next holder acquired before the victim's validity ended")
        if not (h.lost_ns >= tr or h.unlock == "REDLOCK_ELOST"):
            problems.append(f"victim {vid}: the loss was not reported on resume")
        if not rejected:
            problems.append(f"victim {vid}: no stale write after resume was rejected")
        if accepted and nxt:
            problems.append(f"victim {vid}: a write after resume was accepted")


def is_lost(h):
    return (h.lost_ns > 0 or h.unlock == "REDLOCK_ELOST"
            or (h.vend > 0 and h.vend + VEND_RESOLUTION_NS < h.rb))


def acks_in_effect(holds):
    """Whether this build honours replica_acks: it reports the replicas that
    acknowledged a grant (replicas_acked >= 0, "-" when none were asked).
    A build that accepts the option and ignores it reports 0 for every
    member of every hold."""
    return any(v != "0" for h in holds if h.acks for v in h.acks.split(","))


def unacknowledged_grants(holds, need):
    """Holds of the contending workers that counted a member's grant
    acknowledged by fewer than `need` replicas."""
    bad = []
    for h in holds:
        if h.worker >= 100 or not h.acks:
            continue
        acks = h.acks.split(",")
        for i, v in enumerate(acks):
            if h.granted_by(i) and (v == "-" or int(v) < need):
                bad.append(h)
                break
    return bad


def report_failovers(nemesis, holds, events, problems):
    """Failover cases: for each master kill, how long the failover took, the
    time from the kill to the first successful acquire begun after the
    master was gone (any name, any members) and to the first one the killed
    group granted (on its new master), and how the holds that group had
    granted at the kill fared. The kill time
    is the kill_master event, logged right before `rig kill-master` (which
    looks the master up, SIGKILLs it and waits until it is gone), so the
    times are never understated. The kill command's own time (a master
    lookup, SIGKILL, waiting until the process is gone) is printed too."""
    kills = [(t, a) for t, ev, a in events if ev == "kill_master"]
    timeouts = [a for t, ev, a in events if ev == "failover_timeout"]
    for a in timeouts:
        problems.append(f"no failover of group {a[0]} from port {a[1]} within 30 s")
    if not kills:
        problems.append("no master was killed")
        return
    by_ae = sorted(holds, key=lambda h: h.ae)
    firsts, on_new = [], []
    for t, a in kills:
        g = int(a[0])
        done = next((u for u, ev, b in events if ev == "failover_done" and u > t and b[0] == a[0]),
                    None)
        # The master is surely dead once `killed` is logged: an acquire
        # begun after that was not granted by it.
        gone = next((u for u, ev, b in events if ev == "killed" and u >= t and b[0] == a[0]), t)
        first = next((h for h in by_ae if h.ab > gone), None)
        first_g = next((h for h in by_ae if h.ab > gone and h.granted_by(g - 1)), None)
        at_kill = [h for h in holds if h.ae < t < h.end and h.granted_by(g - 1)]
        lost = [h for h in at_kill if is_lost(h)]
        ms = lambda h: f"{(h.ae - t) / 1e6:.0f} ms" if h else "none"
        if first:
            firsts.append((first.ae - t) / 1e6)
        if first_g:
            on_new.append((first_g.ae - t) / 1e6)
        print(f"# failover: group {g} master {a[1]} killed at {fmt_t(t)}"
              f"{' (' + ' '.join(a[2:]) + ')' if len(a) > 2 else ''}; sentinels agreed on "
              f"{'the new master ' + f'{(done - t) / 1e6:.0f} ms' if done else 'no new master'} "
              f"later (kill command {(gone - t) / 1e6:.0f} ms); first acquire after the kill "
              f"{ms(first)}, first granted by group {g} "
              f"(its new master) {ms(first_g)}; holds group {g} had granted at the kill: "
              f"{len(at_kill)}, lost since: {len(lost)}")
    if firsts:
        print(f"# failover: {len(kills)} master kills; kill to first acquire: "
              f"{', '.join(f'{x:.0f}' for x in firsts)} ms; kill to first grant by the killed "
              f"group's new master: {', '.join(f'{x:.0f}' for x in on_new) or 'none'} ms")


def check_races(holds, fails, writes, events, pairs, problems):
    """failover_noacks: the forced races. Race 200/201 (replica_acks = 0)
    must produce the violation, so that the checker is shown able to catch
    it. Race 300/301 (replica_acks = 1) must not: the victim may get the
    lock only after the frozen replica was thawed, and the probe must not
    get it from the promoted replica.

    Until the library implements replica_acks (it accepted the option and
    ignored it at first), race 300 cannot be judged: the harness tells by
    the background workers, which run with replica_acks = 0. A build that
    implements it reports replicas_acked = -1 ("-" in the records) for a
    grant no WAIT was asked for; one that does not reports 0."""
    ev = defaultdict(dict)
    for t, e, a in events:
        if a:
            ev[e].setdefault(a[0], t)
    det = [p for p in pairs if p[0].name == "safety-det"]
    det2 = [p for p in pairs if p[0].name == "safety-det2"]
    v1 = [h for h in holds if h.worker == 200]
    p1 = [h for h in holds if h.worker == 201]
    if "200" in ev["race_begin"]:
        line = "# race replica_acks=0: "
        if not v1:
            problems.append("race 200: the victim never got the lock")
        else:
            h = v1[0]
            line += (f"victim held safety-det from {fmt_t(h.ae)} (token {h.token}); ")
            if p1:
                line += (f"after the failover the probe got it at {fmt_t(p1[0].ae)} "
                         f"(token {p1[0].token}) from the promoted replica, "
                         f"{(p1[0].ae - ev['killed'].get('1', p1[0].ae)) / 1e6:.0f} ms after the "
                         f"kill; ")
            stale = [f for f in fails if f[0] == 201]
            if not p1:
                problems.append("race 200: the probe did not get the lock after the failover: "
                                "the forced race did not produce the violation"
                                + (f" (probe: {stale[0][5]})" if stale else ""))
            stale = [w for w in writes if w["worker"] == 200 and w["rc"] == "REDLOCK_ESTALE_TOKEN"]
            line += f"{len(det)} overlaps; fencing rejected {len(stale)} of the victim's writes"
            # The probe's token comes from the new master's clock (the
            # node-time term), so it is above the victim's although the
            # stored token was lost: fencing applies, and must have worked.
            if p1 and not stale:
                problems.append("race 200: fencing rejected none of the victim's writes after "
                                "the probe's")
        print(line)
        if p1 and not det:
            problems.append("race 200: the probe acquired while the victim held the lock, "
                            "yet no overlap was found")
    if "300" in ev["race_begin"]:
        thaw = ev["replica_thaw"].get("300")
        v2 = [h for h in holds if h.worker == 300]
        p2 = [h for h in holds if h.worker == 301]
        effective = acks_in_effect(holds)
        if v2:
            h = v2[0]
            acks = h.acks or "-"
            if thaw is not None and h.ae < thaw:
                if not effective:
                    print(f"# race replica_acks=1: NOT IN EFFECT: the victim was granted at "
                          f"{fmt_t(h.ae)} while the replica was frozen (acks {acks}), and "
                          f"grants without WAIT report 0 acknowledgements rather than -1: this "
                          f"build does not implement replica_acks yet; the race is not judged")
                else:
                    problems.append(f"race 300: granted while the replica was frozen "
                                    f"(acks {acks}): {h}")
            else:
                print(f"# race replica_acks=1: the victim waited {(h.ae - h.ab) / 1e6:.0f} ms "
                      f"and was granted {(h.ae - thaw) / 1e6 if thaw else 0:.0f} ms after the "
                      f"replica was thawed (acks {acks}); "
                      + (f"the probe got the lock from the promoted replica at {fmt_t(p2[0].ae)}"
                         if p2 else "the promoted replica still had the hold: the probe was refused"))
        else:
            print("# race replica_acks=1: the victim was refused for its whole wait "
                  f"({', '.join(sorted(set(f[5] for f in fails if f[0] == 300))) or '?'})")
        if effective:
            if det2:
                problems.append(f"race 300: {len(det2)} overlaps with replica_acks = 1")
            if p2 and v2 and p2[0].ae < v2[0].end:
                problems.append("race 300: the probe got the lock the victim held")


def check_soak(samples, totals, duration_ns, start, problems):
    per = defaultdict(list)
    for (wid, t, rss, fds, cycles) in samples:
        per[wid].append((t, rss, fds, cycles))
    asan = any(v["asan"] for v in totals.values())
    worst_rss, worst_fds, lines = 0, 0, []
    for wid, ss in sorted(per.items()):
        if wid >= 100:
            continue
        ss.sort()
        warm = [s for s in ss if s[0] >= start + duration_ns // 4]
        if len(warm) < 2:
            problems.append(f"worker {wid}: too few resource samples")
            continue
        d_rss, d_fds = warm[-1][1] - warm[0][1], warm[-1][2] - warm[0][2]
        worst_rss, worst_fds = max(worst_rss, d_rss), max(worst_fds, d_fds)
        lines.append(f"w{wid}: rss {warm[0][1]}->{warm[-1][1]} kB, fds {warm[0][2]}->{warm[-1][2]}, "
                     f"cycles {warm[0][3]}->{warm[-1][3]}")
    cycles = sum(v["cycles"] for k, v in totals.items() if k < 100)
    print(f"# soak: {cycles} cycles; after warm-up (first quarter) the largest growth of a "
          f"worker was rss +{worst_rss} kB, fds +{worst_fds}" + (" (ASan build: rss not judged)" if asan else ""))
    for l in lines:
        print(f"#   {l}")
    if not asan and worst_rss > 4096:
        problems.append(f"resident memory grew by {worst_rss} kB after warm-up")
    if worst_fds > 8:
        problems.append(f"open file descriptors grew by {worst_fds} after warm-up")


def main():
    global T0
    ap = argparse.ArgumentParser()
    ap.add_argument("--nemesis", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--note", action="append", default=[])
    args = ap.parse_args()
    holds, fails, writes, samples, totals, errors, events, final, still = load(args.dir)
    starts = [t for t, ev, _ in events if ev == "start"]
    ends = [t for t, ev, _ in events if ev == "end"]
    T0 = starts[0] if starts else min([h.ab for h in holds] or [0])
    problems = []
    # Outside the algorithm's assumptions: these may break mutual exclusion,
    # and the checker must see it when they do.
    expect_violation = args.nemesis in ("kill_nopersist", "clock_far", "failover_noacks")

    pairs = overlaps(holds)
    for a, b in pairs[:10]:
        print(f"# OVERLAP on {a.name}: {a} and {b}: "
              f"{(min(a.end, b.end) - max(a.ae, b.ae)) / 1e6:.1f} ms")
    excess = kinds.over_limit(holds)
    kinds.report(args.nemesis, holds, fails, excess, problems, fmt_t)
    attempts = len(holds) + len(fails)
    availability = len(holds) / attempts if attempts else 0.0
    gap_ms = longest_gap_ns(holds, fails) // NS_PER_MS
    outs = lockouts(holds, still)
    lockout_ms = max((b - a for a, b, _ in outs), default=0) // NS_PER_MS
    report_lockouts(args.nemesis, outs, events)

    # A hold is lost when the library said so (callback or unlock) or when
    # its validity ran out before the worker released it.
    def expired(h):
        return h.vend > 0 and h.vend + VEND_RESOLUTION_NS < h.rb

    lost = [h for h in holds if h.mode == "watchdog"
            and (h.lost_ns > 0 or h.unlock == "REDLOCK_ELOST" or expired(h))]
    in_time = [h for h in lost if h.lost_ns > 0
               and (h.vend == 0 or h.lost_ns <= h.vend + VEND_RESOLUTION_NS)]
    for h in [h for h in lost if h not in in_time][:5]:
        when = (f"{(h.lost_ns - h.vend) / 1e6:.1f} ms after its validity ended ({h.lost_reason})"
                if h.lost_ns else f"only by unlock ({h.unlock})")
        print(f"# late loss report: {h}: reported {when}")
    lease_expired = [h for h in holds if h.mode == "lease" and expired(h)]
    silent = [h for h in holds if expired(h) and h.lost_ns == 0 and h.unlock != "REDLOCK_ELOST"]
    for h in silent[:5]:
        problems.append(f"validity ended before release, yet neither a callback nor unlock "
                        f"reported the loss: {h} (unlock {h.unlock})")

    decreases = token_decreases(holds)
    for a, b in decreases[:5]:
        print(f"# TOKEN DECREASE on {b.name}: {a} then {b}")
    missing_token = [h for h in holds if h.token == 0 and h.kind in kinds.FENCED]
    if missing_token:
        problems.append(f"{len(missing_token)} holds without a fencing token")

    regressions, unjustified, final_bad = storage_checks(writes, final)
    stale = [w for w in writes if w["rc"] == "REDLOCK_ESTALE_TOKEN"]
    stale_valid = [w for w in stale if w["in_validity"]]
    for w in regressions[:5]:
        problems.append(f"storage accepted token {w['token']} after a higher one: {w}")
    for w in unjustified[:5]:
        problems.append(f"storage rejected token {w['token']} with no higher token accepted before: {w}")
    for name, top, tok, value in final_bad:
        problems.append(f"storage {name}: final token {tok} value {value!r}, "
                        f"highest accepted write had token {top}")
    print(f"# fencing: {len(writes)} fenced writes, "
          f"{sum(1 for w in writes if w['rc'] == 'REDLOCK_OK')} accepted, {len(stale)} rejected as stale "
          f"({len(stale_valid)} made within the writer's claimed validity, which the lock alone "
          f"would have let through; {len(stale) - len(stale_valid)} after it), "
          f"{len(regressions)} accepted below an earlier token")
    print(f"# holds: {len(holds)} ({sum(1 for h in holds if h.mode == 'watchdog')} watchdog), "
          f"failed attempts {len(fails)}, fixed-lease holds that outlived their validity "
          f"{len(lease_expired)} (all reported by unlock unless listed below), "
          f"unexpected errors {len(errors)}")
    for e in errors[:5]:
        print(f"#   {e}")
    # Not a safety failure, but a false alarm to the caller: unlock said the
    # hold was lost although the worker released it within the validity it
    # had confirmed, with no on_lost before.
    false_lost = [h for h in holds if h.unlock == "REDLOCK_ELOST" and h.lost_ns == 0
                  and h.vend > 0 and h.rb + VEND_RESOLUTION_NS < h.vend]
    if false_lost:
        h = false_lost[0]
        print(f"# unlock returned REDLOCK_ELOST for {len(false_lost)} holds released before "
              f"their confirmed validity ended, with no on_lost: e.g. {h}, released "
              f"{(h.vend - h.rb) / 1e6:.0f} ms before it (answers: acquire/release)")
    for n in args.note:
        print(f"# note: {n}")

    if args.nemesis in ("freeze3", "aof_freeze"):
        check_freeze3(args.nemesis, holds, fails, events, problems)
    if args.nemesis.startswith("failover_"):
        report_failovers(args.nemesis, holds, events, problems)
    if args.nemesis == "failover_noacks":
        check_races(holds, fails, writes, events, pairs, problems)
    # failover_acks needs replica_acks = 1 in effect: a grant reporting no
    # acknowledgement means the library ignored it, a failure of its own.
    if args.nemesis == "failover_acks":
        if not acks_in_effect(holds):
            problems.append("no grant reported a replica acknowledgement: replica_acks = 1 "
                            "was not in effect")
        bad = unacknowledged_grants(holds, 1)
        for h in bad[:5]:
            problems.append(f"a grant counted toward the quorum without a replica's "
                            f"acknowledgement (acks {h.acks}): {h}")
    if args.nemesis == "pause_holder":
        check_pause(holds, writes, events, problems)
    if args.nemesis == "soak":
        dur = (ends[0] - T0) if ends else 0
        check_soak(samples, totals, dur, T0, problems)
    if not holds:
        problems.append("no acquisition at all: the harness did not exercise the lock")
    if decreases:
        problems.append(f"{len(decreases)} fencing tokens not above an earlier acquisition's")

    rc = 0
    if pairs and not expect_violation:
        problems.append(f"{len(pairs)} overlapping holds: mutual exclusion violated")
    if expect_violation:
        probe = [h for h in holds if h.worker == 201]
        why = {"kill_nopersist": "restarting a majority without persistence",
               "clock_far": "a node whose clock runs far faster than the drift bound, in a "
                            "holder's minimal quorum,",
               "failover_noacks": "a failover to a replica that missed the grant "
                                  "(replica_acks = 0)"}[args.nemesis]
        if pairs:
            print(f"# {args.nemesis}: {len(pairs)} violations DETECTED, as expected: {why} is "
                  f"outside the algorithm's assumptions; fencing stopped {len(stale_valid)} "
                  f"writes of holders that still believed they held the lock")
        elif probe and args.nemesis != "failover_noacks":
            problems.append("the probe acquired while the victim held the lock, yet no overlap was found")
        else:
            print(f"# {args.nemesis}: this schedule produced no overlap")
    for p in problems:
        print(f"# FAIL: {p}")
    if problems:
        rc = 1
    print(f"nemesis={args.nemesis} violations={len(pairs) + len(excess)} acquisitions={len(holds)} "
          f"availability={availability:.3f} longest_gap_ms={gap_ms} lockout_ms={lockout_ms} "
          f"losses={len(lost)} "
          f"losses_reported_in_time={len(in_time)}/{len(lost)} "
          f"token_decreases={len(decreases)} stale_writes_rejected={len(stale)}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
