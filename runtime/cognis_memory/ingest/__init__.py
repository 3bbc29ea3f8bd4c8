"""The ingest pipeline: raw store, speaker/time resolution, fact extraction, embedding."""
