"""Development and test tools of cognis-memory (the ``devtools/`` package, installed by ``scripts/setup.sh``).

* :mod:`.local_servers`: real PostgreSQL + pgvector, Redis and OpenSearch on 127.0.0.1
  (``python -m cognis_dev.local_servers up ...``; docs/local-servers.md);
* :mod:`.fixtures`: the pytest fixtures that start them (``tests/conftest.py`` imports them);
* :mod:`.processes`: ``free_port``, waiting for a process's HTTP answer, stopping it, and
  :class:`~.processes.ServeProcess` (a real ``cognis-memory serve``);
* :mod:`.http_server`: an ASGI app served by uvicorn from a thread;
* :mod:`.bench_common`: what every benchmark script shares (data, latency summaries, the one percentile);
* the code of the scripts the tests exercise (``scripts/<name>.py`` is the command line only):
  :mod:`.config_table` (the README's configuration table, ``scripts/config_table.py``),
  :mod:`.onnx_export` (an encoder to ONNX fp32/int8, ``scripts/export_onnx_embedder.py``) and
  :mod:`.reranker_staging` (the reranker model in S3, ``scripts/stage_reranker_model.py``).
"""
