#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""A strict reader of the Prometheus text exposition format 0.0.4.

    prom_check.py FILE        exit 0 if FILE is valid, else 1 with the reason
    prom_check.py --self-test checks the checker on good and bad texts

Stricter than Prometheus itself where our output must be exact: every
sample belongs to a family announced by "# HELP" and "# TYPE" before its
first sample, families are contiguous, counters end in _total and are not
negative, series are unique, and histograms have cumulative, monotonic
buckets ending in le="+Inf" equal to _count, with _sum and _count.
"""
import math
import re
import sys

METRIC = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
HELP_RE = re.compile(r"# HELP (%s) (.*)" % METRIC)
TYPE_RE = re.compile(r"# TYPE (%s) (counter|gauge|histogram|summary|untyped)" % METRIC)
SAMPLE_RE = re.compile(r"(%s)(\{.*\})? (\S+)( -?[0-9]+)?" % METRIC)
# One label pair; the value allows exactly the escapes \\ \" \n.
PAIR_RE = re.compile(r'(%s)="((?:[^"\\\n]|\\[\\"n])*)"' % LABEL)
HELP_TEXT_RE = re.compile(r"(?:[^\\]|\\[\\n])*")
FLOAT_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


class Bad(Exception):
    pass


def parse_value(s, where):
    if s in ("+Inf", "-Inf", "NaN"):
        return float(s)
    if not FLOAT_RE.fullmatch(s):
        raise Bad("%s: value %r is not a number" % (where, s))
    return float(s)


def parse_labels(text, where):
    """'{a="x",b="y"}' -> (('a', 'x'), ('b', 'y')), strictly."""
    inner = text[1:-1]
    pairs, pos = [], 0
    while pos < len(inner):
        m = PAIR_RE.match(inner, pos)
        if not m:
            raise Bad("%s: malformed label at %r" % (where, inner[pos:]))
        name = m.group(1)
        if name.startswith("__"):
            raise Bad("%s: reserved label name %s" % (where, name))
        if name in dict(pairs):
            raise Bad("%s: label %s twice" % (where, name))
        value = re.sub(r"\\(.)", lambda e: {"n": "\n"}.get(e.group(1), e.group(1)), m.group(2))
        pairs.append((name, value))
        pos = m.end()
        if pos < len(inner):
            if inner[pos] != ",":
                raise Bad("%s: expected ',' between labels" % where)
            pos += 1
            if pos == len(inner):
                raise Bad("%s: trailing ',' in labels" % where)
    return tuple(pairs)


def family_of(name, types):
    """The family a sample name belongs to (histogram suffixes stripped)."""
    for suffix in ("_bucket", "_sum", "_count"):
        base = name[: -len(suffix)]
        if name.endswith(suffix) and types.get(base) == "histogram":
            return base
    return name


def check_histogram(fam, samples):
    """samples: [(name, labels, value)] of one histogram family."""
    series = {}
    for name, labels, value in samples:
        rest = tuple(p for p in labels if p[0] != "le")
        s = series.setdefault(rest, {"buckets": [], "sum": None, "count": None})
        if name == fam + "_bucket":
            le = dict(labels).get("le")
            if le is None:
                raise Bad("%s: _bucket without le" % fam)
            s["buckets"].append((parse_value(le, fam + " le"), value))
        elif name == fam + "_sum":
            s["sum"] = value
        elif name == fam + "_count":
            s["count"] = value
        else:
            raise Bad("%s: sample %s in a histogram" % (fam, name))
    for rest, s in series.items():
        b = s["buckets"]
        if not b or b[-1][0] != math.inf:
            raise Bad("%s%s: no le=\"+Inf\" bucket last" % (fam, rest))
        for (le0, c0), (le1, c1) in zip(b, b[1:]):
            if not le1 > le0:
                raise Bad("%s: le %r after %r is not increasing" % (fam, le1, le0))
            if c1 < c0:
                raise Bad("%s: bucket le=%r count %r < %r: not cumulative" % (fam, le1, c1, c0))
        if s["count"] is None or s["sum"] is None:
            raise Bad("%s%s: _sum or _count missing" % (fam, rest))
        if s["count"] != b[-1][1]:
            raise Bad("%s: _count %r != +Inf bucket %r" % (fam, s["count"], b[-1][1]))
        if any(c < 0 or c != int(c) for _, c in b) or s["sum"] < 0:
            raise Bad("%s: negative or fractional counts" % fam)


def check(text):
    """Raises Bad with the reason if text is not valid; returns the families."""
    if text and not text.endswith("\n"):
        raise Bad("the text does not end with a newline")
    helps, types, samples, seen, order = {}, {}, {}, set(), []
    for no, line in enumerate(text.split("\n")[:-1] if text else [], 1):
        where = "line %d" % no
        if line == "":
            continue
        if line.startswith("#"):
            for kind, regex, table in (("HELP", HELP_RE, helps), ("TYPE", TYPE_RE, types)):
                if not line.startswith("# %s " % kind):
                    continue
                m = regex.fullmatch(line)
                # HELP text escapes only backslash and newline.
                bad = m and kind == "HELP" and not HELP_TEXT_RE.fullmatch(m.group(2))
                if not m or bad:
                    raise Bad("%s: malformed %s: %r" % (where, kind, line))
                fam = m.group(1)
                if fam in table:
                    raise Bad("%s: second %s for %s" % (where, kind, fam))
                if fam in samples:
                    raise Bad("%s: %s for %s after its samples" % (where, kind, fam))
                table[fam] = m.group(2)
            continue
        m = SAMPLE_RE.fullmatch(line)
        if not m:
            raise Bad("%s: malformed sample: %r" % (where, line))
        name, labels_text, value_text = m.group(1), m.group(2), m.group(3)
        labels = parse_labels(labels_text, where) if labels_text else ()
        value = parse_value(value_text, where)
        fam = family_of(name, types)
        if fam not in helps or fam not in types:
            raise Bad("%s: %s has no HELP and TYPE before it" % (where, name))
        if fam not in samples:
            if fam in order:
                raise Bad("%s: family %s is not contiguous" % (where, fam))
            order.append(fam)
            samples[fam] = []
        elif order[-1] != fam:
            raise Bad("%s: family %s is not contiguous" % (where, fam))
        key = (name, labels)
        if key in seen:
            raise Bad("%s: duplicate series %s%s" % (where, name, labels_text or ""))
        seen.add(key)
        if types[fam] == "counter":
            if not name.endswith("_total"):
                raise Bad("%s: counter %s does not end in _total" % (where, name))
            if value < 0 or math.isnan(value):
                raise Bad("%s: counter %s is %r" % (where, name, value))
        if types[fam] != "histogram" and dict(labels).get("le") is not None:
            raise Bad("%s: le label outside a histogram" % where)
        samples[fam].append((name, labels, value))
    for fam, kind in types.items():
        if kind == "histogram":
            check_histogram(fam, samples.get(fam, []))
    return samples


GOOD = """# HELP a_total A counter.
# TYPE a_total counter
a_total 3
# HELP n_total Per node.
# TYPE n_total counter
n_total{node="x\\"y\\\\z\\nw"} 1
n_total{node="b"} 0
# HELP h_seconds A histogram.
# TYPE h_seconds histogram
h_seconds_bucket{le="0.5"} 1
h_seconds_bucket{le="1"} 2
h_seconds_bucket{le="+Inf"} 3
h_seconds_sum 4.25
h_seconds_count 3
"""

BAD = [
    ("no newline at the end", GOOD.rstrip("\n")),
    ("sample before TYPE", "# HELP a_total x\na_total 1\n# TYPE a_total counter\n"),
    ("no HELP", "# TYPE a_total counter\na_total 1\n"),
    ("counter without _total", "# HELP a x\n# TYPE a counter\na 1\n"),
    ("bad metric name", "# HELP 1a_total x\n# TYPE 1a_total counter\n1a_total 1\n"),
    ("bad label name", GOOD.replace('{node="b"}', '{no-de="b"}')),
    ("bad escape", GOOD.replace('{node="b"}', '{node="a\\tb"}')),
    ("raw quote", GOOD.replace('{node="b"}', '{node="a"b"}')),
    ("duplicate series", GOOD.replace('{node="b"}', '{node="x\\"y\\\\z\\nw"}')),
    ("not a number", GOOD.replace("a_total 3", "a_total three")),
    ("negative counter", GOOD.replace("a_total 3", "a_total -1")),
    ("not cumulative", GOOD.replace('le="1"} 2', 'le="1"} 0')),
    ("le not increasing", GOOD.replace('le="1"}', 'le="0.25"}')),
    ("no +Inf", GOOD.replace('h_seconds_bucket{le="+Inf"} 3\n', "")),
    ("+Inf != count", GOOD.replace("h_seconds_count 3", "h_seconds_count 4")),
    ("no _sum", GOOD.replace("h_seconds_sum 4.25\n", "")),
    ("interleaved families", GOOD + 'n_total{node="c"} 1\n'),
    ("garbage line", GOOD + "hello world again\n"),
    ("second TYPE", GOOD + "# TYPE a_total counter\n"),
    ("second HELP", GOOD + "# HELP h_seconds again\n"),
    ("bad HELP escape", GOOD.replace("A counter.", "A \\t counter.")),
    ("unknown TYPE", GOOD.replace("a_total counter", "a_total countr")),
]


def self_test():
    check(GOOD)
    for what, text in BAD:
        try:
            check(text)
        except Bad:
            continue
        print("self-test: accepted a text with %s" % what)
        return 1
    print("self-test: good text accepted, %d bad texts rejected" % len(BAD))
    return 0


def main(argv):
    if argv[1:] == ["--self-test"]:
        return self_test()
    if len(argv) != 2:
        print("usage: prom_check.py FILE | --self-test", file=sys.stderr)
        return 64
    with open(argv[1], encoding="utf-8") as f:
        text = f.read()
    try:
        fams = check(text)
    except Bad as e:
        print("prom_check: %s: %s" % (argv[1], e), file=sys.stderr)
        return 1
    print("prom_check: %d families, %d samples" % (len(fams), sum(map(len, fams.values()))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
