"""Event times: ours (``cognis_memory.timeexpr``) against date libraries on the labelled set.

The set is :mod:`cognis_dev.date_set` (our own sentences with their message times and the span
a reader takes from each; see its docstring). Every resolver gets the sentence and its message
time and returns the span of the first time expression it finds, or nothing:

* ``ours``: :func:`cognis_memory.timeexpr.find_time_spans`, first span;
* ``dateparser-past`` / ``-future`` / ``-current``: ``dateparser.search.search_dates`` with
  ``RELATIVE_BASE`` = the message time and ``PREFER_DATES_FROM`` = past / future /
  current_period; it returns a point, not a span (first hit in text order);
* ``ctparse``: ``ctparse.ctparse(text, ts=message time)``; a month or day it leaves without a
  year gets the message's year, a duration ("2 weeks") counts as nothing found;
* ``recognizers-past`` / ``-future``: Microsoft Recognizers-Text (``recognize_datetime``), which
  gives both readings of an underspecified date; ``-past`` takes the first, ``-future`` the last.

Two scores per category, on the sentences not marked ambiguous:

* **exact**: the span's start and end equal the label's (ours also the granularity);
* **point**: the centre of what was found (a point for dateparser) lies in the labelled span.
  For a "no date" sentence both mean: nothing found.

The libraries are not project dependencies; install them beside the venv for a run:

    .venv/bin/pip install --target /tmp/datelibs dateparser ctparse
    .venv/bin/pip install --target /tmp/reclibs recognizers-text-suite "emoji<2"
    PYTHONPATH=runtime:devtools:/tmp/datelibs:/tmp/reclibs .venv/bin/python scripts/bench_dates.py
    ... scripts/bench_dates.py --resolvers ours --errors ours        # ours alone, with its errors

A resolver whose library does not import is left out (said on stderr). The full results go to
``--out``/dates.json (default ``bench-results/``); stdout ends with one JSON line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from cognis_dev.date_set import CATEGORIES, DateCase, date_cases

from cognis_memory.timeexpr import find_time_spans

# (start, end, granularity or None); a point has start == end.
Found = tuple[datetime, datetime, str | None]
Resolver = Callable[[str, datetime], Found | None]


def ours(text: str, ref: datetime) -> Found | None:
    spans = find_time_spans(text, ref)
    return (spans[0].start, spans[0].end, spans[0].granularity) if spans else None


def _utc(d: datetime) -> datetime:
    return d.replace(tzinfo=UTC) if d.tzinfo is None else d.astimezone(UTC)


def _dateparser(prefer: str) -> Resolver:
    from dateparser.search import search_dates

    def resolve(text: str, ref: datetime) -> Found | None:
        settings = {"RELATIVE_BASE": ref.replace(tzinfo=None), "PREFER_DATES_FROM": prefer}
        hits = search_dates(text, languages=["en"], settings=settings)  # type: ignore[arg-type]
        if not hits:
            return None
        point = _utc(hits[0][1])
        return point, point, None

    return resolve


def _ctparse() -> Resolver:
    from ctparse import ctparse
    from ctparse.types import Interval, Time

    def bounds(t: Any, year: int) -> tuple[datetime, datetime] | None:
        y = t.year or year
        if t.month and t.day:
            start = datetime(y, t.month, t.day, tzinfo=UTC)
            return start, start + timedelta(days=1)
        if t.month:
            start = datetime(y, t.month, 1, tzinfo=UTC)
            return start, datetime(y + t.month // 12, t.month % 12 + 1, 1, tzinfo=UTC)
        if t.year:
            return datetime(y, 1, 1, tzinfo=UTC), datetime(y + 1, 1, 1, tzinfo=UTC)
        return None

    def resolve(text: str, ref: datetime) -> Found | None:
        result = ctparse(text, ts=ref.replace(tzinfo=None), timeout=2)
        if result is None:
            return None
        r = result.resolution
        if isinstance(r, Time):
            b = bounds(r, ref.year)
        elif isinstance(r, Interval) and r.t_from is not None:
            first = bounds(r.t_from, ref.year)
            last = bounds(r.t_to, ref.year) if r.t_to is not None else first
            b = (first[0], last[1]) if first and last else None
        else:  # a duration, or nothing it could place
            b = None
        return (b[0], b[1], None) if b else None

    return resolve


def _recognizers(pick: int) -> Resolver:
    from recognizers_date_time import recognize_datetime
    from recognizers_text import Culture

    def resolve(text: str, ref: datetime) -> Found | None:
        for model in recognize_datetime(text, Culture.English, reference=ref.replace(tzinfo=None)):
            values = [v for v in (model.resolution or {}).get("values", []) if v.get("value") != "not resolved"]
            if not values:
                continue
            v = values[pick]
            first = v.get("start") or v.get("value") or v.get("end")  # "by Friday" has an end only
            try:
                start = _utc(datetime.fromisoformat(first[:10]))
                end = _utc(datetime.fromisoformat(v["end"][:10])) if v.get("start") and v.get("end") else None
            except (TypeError, ValueError):
                continue
            end = end or start + timedelta(days=1)
            return start, end, None
        return None

    return resolve


RESOLVERS: dict[str, Callable[[], Resolver]] = {
    "ours": lambda: ours,
    "dateparser-past": lambda: _dateparser("past"),
    "dateparser-future": lambda: _dateparser("future"),
    "dateparser-current": lambda: _dateparser("current_period"),
    "ctparse": _ctparse,
    "recognizers-past": lambda: _recognizers(0),
    "recognizers-future": lambda: _recognizers(-1),
}


def score(case: DateCase, found: Found | None, *, strict_granularity: bool) -> tuple[bool, bool]:
    """(exact, point) for one sentence."""
    if case.expected is None or found is None:
        same = case.expected is None and found is None
        return same, same
    start, end, granularity = case.expected
    exact = (found[0], found[1]) == (start, end) and (not strict_granularity or found[2] == granularity)
    centre = found[0] + (found[1] - found[0]) / 2
    return exact, start <= centre < end


def _fmt(found: Found | None) -> str:
    if found is None:
        return "nothing"
    if found[0] == found[1]:
        return found[0].date().isoformat()
    return f"{found[0].date()}..{(found[1] - timedelta(days=1)).date()}" + (f" {found[2]}" if found[2] else "")


def run(names: list[str], cases: list[DateCase]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for name in names:
        try:
            resolver = RESOLVERS[name]()
        except ImportError as exc:
            print(f"{name}: left out ({exc})", file=sys.stderr)
            continue
        per: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # n, exact, point
        errors: list[dict[str, str]] = []
        t0 = time.perf_counter()
        for case in cases:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    found = resolver(case.text, case.reference)
                except Exception as exc:  # a library's own failure counts as nothing found
                    print(f"{name}: {case.text!r}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    found = None
            if case.ambiguous:
                continue
            exact, point = score(case, found, strict_granularity=name == "ours")
            for key in (case.category, "all", *([case.source] if case.source.startswith("held-out") else [])):
                per[key][0] += 1
                per[key][1] += exact
                per[key][2] += point
            if not (exact if name == "ours" else point):
                errors.append(
                    {
                        "category": case.category,
                        "said": case.reference.strftime("%a %Y-%m-%d"),
                        "text": case.text,
                        "want": _fmt(case.expected and (*case.expected[:2], case.expected[2])),
                        "got": _fmt(found),
                    }
                )
        results[name] = {
            "per_category": {k: {"n": v[0], "exact": v[1] / v[0], "point": v[2] / v[0]} for k, v in per.items()},
            "errors": errors,
            "seconds": time.perf_counter() - t0,
        }
    return results


def table(results: dict[str, Any], cases: list[DateCase]) -> str:
    names = list(results)
    rows = [*CATEGORIES, "held-out", "held-out-2", "all"]
    head = ["category", "n", "ambig."] + [f"{n} exact" if n == "ours" else n for n in names]
    if "ours" in names:
        head.insert(4, "ours point")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        n_amb = sum(c.ambiguous and row in (c.category, "all", c.source) for c in cases)
        first = next(iter(results.values()))["per_category"].get(row, {"n": 0})
        cells = [row, str(first["n"]), str(n_amb)]
        for name in names:
            cat = results[name]["per_category"].get(row)
            cells.append(f"{cat['exact' if name == 'ours' else 'point']:.3f}" if cat else "-")
            if name == "ours":
                cells.append(f"{cat['point']:.3f}" if cat else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--resolvers", default=",".join(RESOLVERS), help="comma-separated, of: " + ", ".join(RESOLVERS))
    p.add_argument("--errors", default="ours", help="comma-separated resolvers whose errors to print ('' for none)")
    p.add_argument("--out", type=Path, default=Path("bench-results"), help="writes dates.json here")
    args = p.parse_args(argv)
    cases = date_cases()
    results = run([n for n in args.resolvers.split(",") if n], cases)
    print(
        f"{len(cases)} sentences, {sum(c.ambiguous for c in cases)} ambiguous (not scored); "
        f"{datetime.now(UTC):%Y-%m-%d}; ours scored exact (span and granularity), the libraries by point\n"
    )
    print(table(results, cases))
    for name in [n for n in args.errors.split(",") if n in results]:
        errs = results[name]["errors"]
        print(f"\n{name}: {len(errs)} errors")
        for e in errs:
            print(f"  [{e['category']}] {e['said']}: {e['text']!r}: want {e['want']}, got {e['got']}")
    for name, r in results.items():
        print(f"{name}: {r['seconds']:.1f} s for {len(cases)} sentences", file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dates.json").write_text(json.dumps(results, indent=2, default=str), "utf-8")
    summary = {
        "sentences": len(cases),
        "ambiguous": sum(c.ambiguous for c in cases),
        "all": {n: r["per_category"]["all"]["exact" if n == "ours" else "point"] for n, r in results.items()},
        "min_category": {
            n: min(v["exact" if n == "ours" else "point"] for k, v in r["per_category"].items() if k in CATEGORIES)
            for n, r in results.items()
        },
        "errors": {n: len(r["errors"]) for n, r in results.items()},
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
