"""Prometheus histograms read from the text format: buckets, their difference between two
scrapes, and histogram_quantile()."""

import re


def histogram(text, name, labels):
    """Cumulative buckets [(le, count)] of the series `name` whose labels include `labels`."""
    buckets = []
    for line in text.splitlines():
        if not line.startswith(name + "_bucket{"):
            continue
        inside, value = line[len(name) + 8:].rsplit("}", 1)
        lab = dict(re.findall(r'(\w+)="([^"]*)"', inside))
        if all(lab.get(k) == v for k, v in labels.items()):
            le = float("inf") if lab["le"] == "+Inf" else float(lab["le"])
            buckets.append((le, float(value.split()[0])))
    return sorted(buckets)


def diff_buckets(after, before):
    b = dict(before)
    return [(le, c - b.get(le, 0.0)) for le, c in after]


def quantile(buckets, q):
    """histogram_quantile(): linear interpolation inside the bucket, as Prometheus does."""
    if not buckets or buckets[-1][1] == 0:
        return None
    total = buckets[-1][1]
    rank = q * total
    prev_le, prev_c = 0.0, 0.0
    for le, c in buckets:
        if c >= rank:
            if le == float("inf"):
                return prev_le
            if c == prev_c:
                return le
            return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
        prev_le, prev_c = le, c
    return None


def ms(x):
    return None if x is None else round(x * 1000, 3)
