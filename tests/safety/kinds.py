# SPDX-License-Identifier: BSD-3-Clause
"""The safety rules of the hold kinds other than the plain lock, for
checker.py.

Records of read-write, fair lock and semaphore workers end with the hold's
kind (see worker.c): R a read hold, W a write hold, F a fair lock's hold,
P<K> one permit of a semaphore of K permits. Records without it are the
plain lock's (kind "M").

  fair lock: a fair hold is a plain hold (same hash, same fencing), judged
      by the plain lock's rules unchanged: it overlaps no other hold of its
      name, and its token is above those of holds acquired before it began.
      fairness() only reports how evenly the workers were served.

  read-write lock: a write hold's critical section must not overlap any
      other hold's (read or write) of the same name; read holds may overlap
      each other. checker.overlaps() applies it through exclusive_pair().
  semaphore: at no instant more than K permits' critical sections of one
      name. over_limit() counts one violation per permit whose section
      began while K others of its name were open.
"""
import bisect
import re
from collections import defaultdict

NS_PER_MS = 1_000_000
KIND_RE = re.compile(r"^(R|W|F|P[0-9]+)$")
# The kinds that carry a fencing token and exclude every other hold.
FENCED = ("M", "W", "F")
# fairness() counts an attempt overtaken when another worker's attempt on
# the same name, begun more than one of these margins after it, was granted
# while it still waited. A waiter queues only after its first try, its
# subscription and its ticket, each of which waits up to a node timeout
# (the workers' 100 ms) for a frozen member: so at 100 ms it may not be
# queued yet under a freeze, at 300 ms it surely is, and a later arrival
# granted before it then broke the order.
OVERTAKE_MARGINS_NS = (100 * NS_PER_MS, 300 * NS_PER_MS)


def split_kind(f, min_fields):
    """(kind, fields without it) of a record's whitespace-split fields; kind
    "M" when the record has none (the plain lock). No field of an H or F
    line other than the kind is a lone R, W, F or P<digits>."""
    if len(f) > min_fields and KIND_RE.match(f[-1]):
        return f[-1], f[:-1]
    return "M", f


def permit_limit(kind):
    """K of a permit's kind "P<K>"; None for the other kinds."""
    return int(kind[1:]) if kind.startswith("P") else None


def exclusive_pair(a, b):
    """Whether two holds of one name must not overlap: any two holds of a
    plain, fair or read-write lock but two read holds. Permits are judged
    by over_limit(), not in pairs."""
    if a.kind.startswith("P") or b.kind.startswith("P"):
        return False
    return not (a.kind == "R" and b.kind == "R")


def sweep(holds):
    """For each name, its holds with a critical section, by start, each with
    the holds of that name still open when it began: {name: [(h, open)]}."""
    by_name = defaultdict(list)
    for h in holds:
        if h.end > h.ae:
            by_name[h.name].append(h)
    out = {}
    for name, hs in by_name.items():
        hs.sort(key=lambda h: h.ae)
        active, seq = [], []
        for h in hs:
            active = [o for o in active if o.end > h.ae]
            seq.append((h, list(active)))
            active.append(h)
        out[name] = seq
    return out


def over_limit(holds):
    """Permits whose critical section began while K others of the same name
    were open (K+1 valid at once): [(name, K, [the open ones..., it])]."""
    bad = []
    for name, seq in sweep([h for h in holds if h.kind.startswith("P")]).items():
        # One limit per name (run.sh gives every worker the same); the
        # smallest if the records disagree, which only makes the rule stricter.
        k = min(permit_limit(h.kind) for h, _ in seq)
        for h, open_ in seq:
            if len(open_) >= k:
                bad.append((name, k, open_ + [h]))
    return bad


def most_at_once(holds, kind):
    """The most critical sections of `kind` open at once on one name, and
    how many holds began while another of that kind was open (readers
    sharing, or permits beside others)."""
    most, shared = 0, 0
    for seq in sweep([h for h in holds if h.kind == kind]).values():
        for h, open_ in seq:
            most = max(most, len(open_) + 1)
            shared += bool(open_)
    return most, shared


def fairness(holds, fails, kind="F"):
    """How evenly the workers of `kind` were served: {worker: (holds,
    attempts)}; for each of OVERTAKE_MARGINS_NS, how many attempts were
    overtaken: began more than the margin before another worker's attempt
    on the same name that was granted while they still waited (a fair lock
    grants in ticket order, so only a waiter not yet queued on a quorum, or
    whose place lapsed, can be overtaken); and how many attempts there
    were. A failed attempt waited until its deadline (ab + its wait), not
    until it returned: its last try and its leaving the queue may overrun
    the deadline by node timeouts under a freeze, after its wait ended."""
    per = defaultdict(lambda: [0, 0])
    attempts = []
    for h in holds:
        if h.kind == kind:
            per[h.worker][0] += 1
            per[h.worker][1] += 1
            attempts.append((h.worker, h.name, h.ab, h.ae))
    for f in fails:
        if f[7] == kind:
            per[f[0]][1] += 1
            attempts.append((f[0], f[1], f[2], min(f[3], f[2] + f[4] * NS_PER_MS)))
    granted = defaultdict(list)  # name: [(ab, ae, worker)] by ab
    for h in holds:
        if h.kind == kind:
            granted[h.name].append((h.ab, h.ae, h.worker))
    for g in granted.values():
        g.sort()
    overtaken = []
    for margin in OVERTAKE_MARGINS_NS:
        n = 0
        for (wid, name, ab, ae) in attempts:
            g = granted[name]
            i = bisect.bisect_right(g, (ab + margin, float("inf"), 0))
            while i < len(g) and g[i][0] < ae:
                if g[i][1] < ae and g[i][2] != wid:
                    n += 1
                    break
                i += 1
        overtaken.append(n)
    return {w: tuple(v) for w, v in per.items()}, overtaken, len(attempts)


def report(nemesis, holds, fails, excess, problems, fmt_t):
    """Detail lines for the read-write and semaphore holds, the violations
    of the semaphore rule, and the failures of a case that did not take the
    kinds it is about (its rule would then be judged on nothing)."""
    kinds = defaultdict(int)
    for h in holds:
        kinds[h.kind] += 1
    fkinds = defaultdict(int)
    for f in fails:
        fkinds[f[7]] += 1
    for name, k, group in excess[:10]:
        print(f"# OVER LIMIT on {name}: {len(group)} permits of {k} at once from "
              f"{fmt_t(group[-1].ae)}: " + "; ".join(map(repr, group)))
    if kinds.get("R") or kinds.get("W"):
        most, shared = most_at_once(holds, "R")
        print(f"# read-write: {kinds.get('R', 0)} read holds, {kinds.get('W', 0)} write holds; "
              f"up to {most} readers at once, {shared} read holds began beside another; "
              f"failed attempts: {fkinds.get('R', 0)} read, {fkinds.get('W', 0)} write")
    if kinds.get("F"):
        per, overtaken, attempts = fairness(holds, fails)
        most = max(per.items(), key=lambda x: (x[1][0], -x[0]))
        least = min(per.items(), key=lambda x: (x[1][0], x[0]))
        share = sorted(v[0] / v[1] for v in per.values() if v[1])
        print(f"# fair: {kinds['F']} holds, failed attempts {fkinds.get('F', 0)}; acquisitions "
              f"per worker max {most[1][0]} (worker {most[0]}), min {least[1][0]} "
              f"(worker {least[0]}) over {len(per)} workers; availability per worker "
              f"{share[0]:.3f}..{share[-1]:.3f}; of {attempts} attempts, overtaken by a later "
              f"one granted while they waited: "
              + ", ".join(f"{n} begun > {m // NS_PER_MS} ms later"
                          for n, m in zip(overtaken, OVERTAKE_MARGINS_NS)))
    pk = sorted(k for k in kinds if k.startswith("P"))
    for k in pk:
        most, shared = most_at_once(holds, k)
        print(f"# semaphore: {kinds[k]} permits of {permit_limit(k)}; up to {most} at once on "
              f"a name, {shared} began beside another; failed attempts {fkinds.get(k, 0)}")
    if excess:
        problems.append(f"{len(excess)} permits made more than K valid at once")
    if nemesis.startswith("rw_") and not (kinds.get("R") and kinds.get("W")):
        problems.append(f"read holds {kinds.get('R', 0)}, write holds {kinds.get('W', 0)}: "
                        "the read-write rule was not exercised")
    if nemesis.startswith("fair_") and not kinds.get("F"):
        problems.append("no fair lock hold was taken: the fair lock was not exercised")
    if nemesis.startswith("sem_") and not pk:
        problems.append("no permit was taken: the semaphore rule was not exercised")
