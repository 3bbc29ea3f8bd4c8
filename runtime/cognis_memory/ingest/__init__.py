"""The ingest pipeline: raw store, speaker/time resolution, context-aware extraction, embedding."""
