"""BM25 with one owner's statistics in OpenSearch: checked against a reference, timed beside the plain query.

OpenSearch scores ``match`` with its shard's statistics, so one owner's BM25 scores move when another
owner writes (docs/stores.md, "What a search's scores and order depend on"). This script measures one way to
score with the owner's own statistics, on a probe index of its own (two owners, a seeded vocabulary):

1. the query's tokens, from the index's analyzer (``_analyze``);
2. the owner's statistics in one ``size: 0`` request: its document count, the sum of a ``token_count``
   subfield (the average length) and, per token, a ``filters`` bucket (its document frequency);
3. the search: the owner's ``match`` hits rescored by a ``script_score`` that sums, per token,
   ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length / average))`` with ``tf = termFreq(field, token)``
   (a Painless function of OpenSearch 2.x's score context) and the IDF of Lucene's BM25,
   ``log(1 + (N - n + 0.5) / (n + 0.5))``, from step 2.

It reports whether every owner's hits and scores equal a reference computed in Python from that owner's
documents alone, whether the owner's scores stay the same when another owner writes documents full of the
query's words (they should; the plain ``match`` scores are shown to move), and the latency of both
queries, timed alternately, with their ratio.

    .venv/bin/python scripts/bench_owner_bm25.py                       # starts a local OpenSearch node
    .venv/bin/python scripts/bench_owner_bm25.py --opensearch-url http://127.0.0.1:9200

The last stdout line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from cognis_dev.bench_common import percentile

INDEX = "cognis-probe-owner-bm25"
#: OpenSearch's default ``index.max_result_window``: the most hits one request returns
RESULT_WINDOW = 10_000
K1, B = 1.2, 0.75
#: the score script: the owner's BM25 of the field ``t`` from per-token IDFs and the average length
SCRIPT = """
double length = doc['t.length'].value;
double norm = params.k1 * (1 - params.b + params.b * length / params.average);
double s = 0;
for (entry in params.idf.entrySet()) {
  double tf = termFreq('t', entry.getKey());
  if (tf > 0) { s += entry.getValue() * tf * (params.k1 + 1) / (tf + norm); }
}
return s;
"""


def make_documents(rng: random.Random, n: int, vocabulary: list[str]) -> list[tuple[str, str, str]]:
    """(id, owner, text): owner ``a`` holds a quarter of them, words from the whole vocabulary; owner
    ``b`` draws most of its words from the vocabulary's first fifth, so the two owners' statistics differ."""
    common = vocabulary[: len(vocabulary) // 5]
    docs = []
    for i in range(n):
        owner = "a" if i % 4 == 0 else "b"
        words = [
            rng.choice(common if owner == "b" and rng.random() < 0.7 else vocabulary) for _ in range(rng.randint(3, 20))
        ]
        docs.append((f"d{i}", owner, " ".join(words)))
    return docs


def reference_scores(docs: list[tuple[str, str, str]], owner: str, tokens: list[str]) -> dict[str, float]:
    """Lucene's BM25 over ``owner``'s documents alone (whitespace tokens: the probe's words are plain)."""
    own = [(d, text.split()) for d, o, text in docs if o == owner]
    average = sum(len(words) for _, words in own) / len(own)
    df = {t: sum(1 for _, words in own if t in words) for t in tokens}
    out: dict[str, float] = {}
    for d, words in own:
        s = 0.0
        for t in tokens:
            tf = words.count(t)
            if tf:
                idf = math.log(1 + (len(own) - df[t] + 0.5) / (df[t] + 0.5))
                s += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len(words) / average))
        if s:
            out[d] = s
    return out


def same_ranking(got: dict[str, float], ref: dict[str, float], size: int) -> bool:
    """Whether ``got`` (at most ``size`` hits) is the reference's best ``size``: as many hits, each a reference
    hit, with the scores of the reference's top, best first (equal scores at the cut may be any tied id)."""
    expected = min(len(ref), size)
    top = sorted(ref.values(), reverse=True)[:expected]
    mine = sorted(got.values(), reverse=True)
    if len(mine) != expected or any(d not in ref for d in got):
        return False
    return all(abs(a - b) <= 1e-5 * b for a, b in zip(mine, top, strict=True))


class Probe:
    def __init__(self, client: Any) -> None:
        self.client = client

    def create(self, docs: list[tuple[str, str, str]]) -> None:
        self.client.indices.delete(index=INDEX, ignore_unavailable=True)
        text = {
            "type": "text",
            "analyzer": "standard",
            "fields": {"length": {"type": "token_count", "analyzer": "standard"}},
        }
        self.client.indices.create(
            index=INDEX,
            body={
                "settings": {"number_of_shards": 2, "number_of_replicas": 0},
                "mappings": {"properties": {"owner": {"type": "keyword"}, "t": text}},
            },
        )
        self.add(docs)

    def add(self, docs: list[tuple[str, str, str]]) -> None:
        lines = []
        for d, owner, text in docs:
            lines += [json.dumps({"index": {"_index": INDEX, "_id": d}}), json.dumps({"owner": owner, "t": text})]
        self.client.bulk(body="\n".join(lines) + "\n", refresh=True)

    def tokens(self, text: str) -> list[str]:
        found = self.client.indices.analyze(index=INDEX, body={"field": "t", "text": text})["tokens"]
        return sorted({t["token"] for t in found})

    def _owner_match(self, owner: str, text: str) -> dict[str, Any]:
        return {"bool": {"filter": [{"term": {"owner": owner}}], "must": [{"match": {"t": text}}]}}

    def owner_scored(self, owner: str, text: str, size: int, tokens: list[str] | None = None) -> dict[str, float]:
        """``owner``'s hits scored with its own statistics; ``tokens``: the text's tokens when already known
        (an implementation would keep each word's tokens), else asked of the analyzer first."""
        tokens = self.tokens(text) if tokens is None else tokens
        if not tokens:
            return {}
        stats = self.client.search(
            index=INDEX,
            body={
                "size": 0,
                "track_total_hits": True,
                "query": {"bool": {"filter": [{"term": {"owner": owner}}]}},
                "aggs": {
                    "length": {"sum": {"field": "t.length"}},
                    "df": {"filters": {"filters": {t: {"term": {"t": t}} for t in tokens}}},
                },
            },
        )
        n = stats["hits"]["total"]["value"]
        if not n:
            return {}
        buckets = stats["aggregations"]["df"]["buckets"]
        idf = {
            t: math.log(1 + (n - b["doc_count"] + 0.5) / (b["doc_count"] + 0.5))
            for t, b in buckets.items()
            if b["doc_count"]
        }
        params = {"idf": idf, "average": stats["aggregations"]["length"]["value"] / n, "k1": K1, "b": B}
        body = {
            "size": size,
            "query": {
                "script_score": {
                    "query": self._owner_match(owner, text),
                    "script": {"source": SCRIPT, "params": params},
                }
            },
        }
        return {h["_id"]: h["_score"] for h in self.client.search(index=INDEX, body=body)["hits"]["hits"]}

    def plain_scored(self, owner: str, text: str, size: int) -> dict[str, float]:
        body = {"size": size, "query": self._owner_match(owner, text)}
        return {h["_id"]: h["_score"] for h in self.client.search(index=INDEX, body=body)["hits"]["hits"]}


def run(client: Any, args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    vocabulary = [f"w{i}" for i in range(args.vocabulary)]
    docs = make_documents(rng, args.docs, vocabulary)
    probe = Probe(client)
    probe.create(docs)
    queries = [" ".join(rng.sample(vocabulary, rng.randint(1, 4))) for _ in range(args.queries)]
    # the hits compared: all of owner a's, up to the index's result window
    size = min(sum(1 for _, o, _ in docs if o == "a"), RESULT_WINDOW)
    worst, same_hits = 0.0, 0
    for q in queries:
        got = probe.owner_scored("a", q, size)
        ref = reference_scores(docs, "a", probe.tokens(q))
        same_hits += same_ranking(got, ref, size)
        worst = max([worst, *(abs(got[d] - ref[d]) / ref[d] for d in got if d in ref)])
    # another owner writes documents full of the words of one query: owner a's scores should not move
    q = queries[0]
    before_owner, before_plain = probe.owner_scored("a", q, size), probe.plain_scored("a", q, size)
    probe.add([(f"x{i}", "b", (q + " ") * 3) for i in range(args.docs // 2)])
    after_owner, after_plain = probe.owner_scored("a", q, size), probe.plain_scored("a", q, size)
    known = {q: probe.tokens(q) for q in queries}
    ms: dict[str, list[float]] = {"owner": [], "owner_tokens_known": [], "plain": []}
    for i in range(args.timed):
        text = queries[i % len(queries)]
        asks: dict[str, Callable[[], dict[str, float]]] = {
            "owner": partial(probe.owner_scored, "a", text, args.size),
            "owner_tokens_known": partial(probe.owner_scored, "a", text, args.size, known[text]),
            "plain": partial(probe.plain_scored, "a", text, args.size),
        }
        for name, ask in asks.items():
            t0 = time.perf_counter()
            ask()
            ms[name].append((time.perf_counter() - t0) * 1000)
    client.indices.delete(index=INDEX, ignore_unavailable=True)
    return {
        "documents": args.docs,
        "queries": len(queries),
        "queries_with_the_reference_hits": same_hits,
        "worst_relative_score_error": worst,
        "owner_scores_unchanged_by_another_owner": before_owner == after_owner,
        "plain_scores_unchanged_by_another_owner": before_plain == after_plain,
        "ms": {name: {"p50": percentile(v, 50), "p95": percentile(v, 95)} for name, v in ms.items()},
        # per timed query, its time over the plain query's (the two asked one after the other)
        "ratio_to_plain_p50": {
            name: percentile(sorted(a / b for a, b in zip(ms[name], ms["plain"], strict=True)), 50)
            for name in ("owner", "owner_tokens_known")
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--opensearch-url", help="a running node (default: start one on 127.0.0.1)")
    p.add_argument("--opensearch-heap", default="1g")
    p.add_argument("--docs", type=int, default=2000, help="documents of the probe index (a quarter are owner a's)")
    p.add_argument("--vocabulary", type=int, default=200, help="distinct words")
    p.add_argument("--queries", type=int, default=50, help="queries checked against the reference")
    p.add_argument("--timed", type=int, default=200, help="timed queries, each asked both ways")
    p.add_argument("--size", type=int, default=50, help="hits per timed query (the pipeline's bm25_k)")
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args(argv)
    from opensearchpy import OpenSearch

    server = None
    url = args.opensearch_url
    if not url:
        from cognis_dev.local_servers import OpenSearchServer

        server = OpenSearchServer(heap=args.opensearch_heap, die_with_parent=True).start()
        url = server.url
    try:
        result = run(OpenSearch(url, timeout=60), args)
    finally:
        if server is not None:
            server.stop()
    print(
        f"{result['queries_with_the_reference_hits']}/{result['queries']} queries: the reference's hits; worst "
        f"relative score error {result['worst_relative_score_error']:.1e}; owner scores unchanged by another "
        f"owner's writes: {result['owner_scores_unchanged_by_another_owner']} (plain match: "
        f"{result['plain_scores_unchanged_by_another_owner']})"
    )
    for name, v in result["ms"].items():
        ratio = result["ratio_to_plain_p50"].get(name)
        print(
            f"  {name:<20} p50 {v['p50']:6.1f} ms  p95 {v['p95']:6.1f} ms"
            + (f"  x{ratio:.2f} the plain query" if ratio else "")
        )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
