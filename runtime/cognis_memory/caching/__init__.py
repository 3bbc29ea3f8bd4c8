"""Caches of query embeddings and search results (not stores: losing one costs only time)."""
