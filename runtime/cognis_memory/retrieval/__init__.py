"""The retrieval pipeline: query analysis, two-stage vector search, BM25, weighted RRF,
temporal boosting, deduplication, cross-encoder reranking and version-chain history."""
