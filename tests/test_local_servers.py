"""The local real servers (cognis_dev.local_servers) answer like the production services do.

Shared session servers come from tests/servers.py; the restart/crash tests use private instances so
that they never disturb connections other tests hold to the shared ones.
"""

from __future__ import annotations

import sys
import uuid

import pytest
from cognis_dev.fixtures import start_or_skip
from cognis_dev.local_servers import OpenSearchServer, PostgresServer, RedisServer


def _conftest_provides_server_fixtures() -> bool:
    for name in ("tests.conftest", "conftest"):
        mod = sys.modules.get(name)
        if mod is not None and (
            hasattr(mod, "postgres_server") or "cognis_dev.fixtures" in list(getattr(mod, "pytest_plugins", []) or [])
        ):
            return True
    return False


if not _conftest_provides_server_fixtures():
    # Importing them again when conftest already has them would start a second set of servers.
    from cognis_dev.fixtures import opensearch_server, postgres_server, redis_server  # noqa: F401

pytestmark = pytest.mark.integration

psycopg = pytest.importorskip("psycopg")
redis = pytest.importorskip("redis")
httpx = pytest.importorskip("httpx")


# --------------------------------------------------------------------------------------- PostgreSQL
def test_postgres_select_1_and_pgvector_cosine_query(postgres_server: PostgresServer) -> None:
    assert postgres_server.dsn == f"postgresql://postgres@127.0.0.1:{postgres_server.port}/cognis"
    dsn = postgres_server.create_database("local_servers_vec")
    with psycopg.connect(dsn, autocommit=True) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.execute("SHOW server_version").fetchone()[0].startswith("18.")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        assert (
            conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0].startswith("0.8")
        )
        conn.execute("DROP TABLE IF EXISTS items")
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, user_id text NOT NULL, embedding vector(3) NOT NULL)")
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO items VALUES (%s, %s, %s::vector)",
                [
                    (1, "a", "[1,0,0]"),
                    (2, "b", "[0.9,0.1,0]"),
                    (3, "a", "[0,1,0]"),
                    (4, "a", "[0.7,0.7,0]"),
                ],
            )
        conn.execute("CREATE INDEX ON items USING hnsw (embedding vector_cosine_ops)")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        rows = conn.execute(
            "SELECT id, round((embedding <=> '[1,0,0]')::numeric, 4) FROM items "
            "WHERE user_id = 'a' ORDER BY embedding <=> '[1,0,0]' LIMIT 3"
        ).fetchall()
    assert [r[0] for r in rows] == [1, 4, 3]
    assert float(rows[0][1]) == 0.0


def test_postgres_restart_and_crash_keep_committed_data() -> None:
    pg = start_or_skip(PostgresServer())
    try:
        port, data_dir = pg.port, pg.data_dir
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute("CREATE TABLE kept (id int PRIMARY KEY, v vector(3))")
            conn.execute("INSERT INTO kept VALUES (1, '[1,2,3]')")
        pg.restart()
        assert (pg.port, pg.data_dir) == (port, data_dir)
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            assert conn.execute("SELECT v::text FROM kept WHERE id = 1").fetchone() == ("[1,2,3]",)
            conn.execute("INSERT INTO kept VALUES (2, '[4,5,6]')")
        pg.kill()  # SIGKILL, as in a crash: committed rows come back through WAL recovery
        assert not pg.running
        pg.start()
        assert pg.port == port
        with psycopg.connect(pg.dsn) as conn:
            assert conn.execute("SELECT count(*) FROM kept").fetchone() == (2,)
    finally:
        directory = pg.dir
        pg.stop()
        pg.stop()  # safe twice
    assert directory is None or not directory.exists()


# --------------------------------------------------------------------------------------------- Redis
def test_redis_ping_set_get(redis_server: RedisServer) -> None:
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    client = redis.Redis.from_url(redis_server.url)
    try:
        assert client.ping() is True
        key = f"local-servers:{uuid.uuid4()}"
        assert client.set(key, "v1", ex=60)
        assert client.get(key) == b"v1"
        assert client.config_get("save")["save"] == ""
        assert client.config_get("appendonly")["appendonly"] == "no"
    finally:
        client.close()


def test_redis_restart_same_port() -> None:
    server = start_or_skip(RedisServer())
    try:
        port = server.port
        client = redis.Redis.from_url(server.url)
        client.set("k", "v")
        server.restart()
        assert server.port == port and server.running
        assert client.ping() is True  # redis-py reconnects
        assert client.get("k") is None  # no persistence, by design
        client.close()
    finally:
        server.stop()
    assert not server.running


# ---------------------------------------------------------------------------------------- OpenSearch
def test_opensearch_answers_with_version_2_19(opensearch_server: OpenSearchServer) -> None:
    resp = httpx.get(opensearch_server.url + "/", timeout=30)
    assert resp.status_code == 200
    assert resp.json()["version"]["number"].startswith("2.19.")
    plugins = httpx.get(opensearch_server.url + "/_cat/plugins?format=json", timeout=30).json()
    names = {p["component"] for p in plugins}
    assert {"dev.cognis.opensearch.LuceneOnlyKNNPlugin", "org.opensearch.transport.Netty4Plugin"} <= names


@pytest.mark.parametrize(
    "method",
    [None, {"name": "hnsw", "space_type": "l2"}, {"name": "hnsw", "engine": "faiss", "space_type": "l2"}],
    ids=["no-method", "no-engine", "faiss"],
)
def test_opensearch_rejects_native_knn_engines_up_front(opensearch_server: OpenSearchServer, method) -> None:
    # No JNI libraries here: such a mapping would be accepted by stock k-NN and then hang the first write.
    field = {"type": "knn_vector", "dimension": 3, **({"method": method} if method else {})}
    index = f"local-servers-native-{uuid.uuid4().hex[:8]}"
    resp = httpx.put(
        f"{opensearch_server.url}/{index}",
        json={"settings": {"index": {"knn": True}}, "mappings": {"properties": {"v": field}}},
        timeout=30,
    )
    assert resp.status_code == 400, resp.text
    assert "must use" in resp.json()["error"]["reason"]


def test_opensearch_lucene_knn_with_filter(opensearch_server: OpenSearchServer) -> None:
    opensearch_py = pytest.importorskip("opensearchpy")
    client = opensearch_py.OpenSearch(hosts=[opensearch_server.url], timeout=60)
    index = f"local-servers-knn-{uuid.uuid4().hex[:8]}"
    client.indices.create(
        index=index,
        body={
            "settings": {"index": {"knn": True, "number_of_shards": 1}},
            "mappings": {
                "properties": {
                    "embedding": {
                        "type": "knn_vector",
                        "dimension": 3,
                        "method": {
                            "name": "hnsw",
                            "engine": "lucene",
                            "space_type": "cosinesimil",
                            "parameters": {"m": 16, "ef_construction": 100},
                        },
                    },
                    "user_id": {"type": "keyword"},
                    "text": {"type": "text"},
                }
            },
        },
    )
    try:
        settings = client.indices.get_settings(index=index)[index]["settings"]["index"]
        assert settings["number_of_replicas"] == "0"
        docs = [
            ("1", "a", [1.0, 0.0, 0.0], "coffee in the morning"),
            ("2", "b", [0.99, 0.01, 0.0], "tea in the morning"),
            ("3", "a", [0.0, 1.0, 0.0], "running shoes"),
            ("4", "a", [0.7, 0.7, 0.0], "coffee and running"),
        ]
        for doc_id, user, vec, text in docs:
            client.index(index=index, id=doc_id, body={"user_id": user, "embedding": vec, "text": text})
        client.indices.refresh(index=index)
        query = {
            "size": 3,
            "query": {
                "knn": {
                    "embedding": {
                        "vector": [1.0, 0.0, 0.0],
                        "k": 3,
                        "filter": {"term": {"user_id": "a"}},
                    }
                }
            },
        }
        hits = client.search(index=index, body=query)["hits"]["hits"]
        assert [h["_id"] for h in hits] == ["1", "4", "3"]
        assert all(h["_source"]["user_id"] == "a" for h in hits)
        # BM25 on the same index still works.
        bm25 = client.search(index=index, body={"query": {"match": {"text": "coffee"}}})["hits"]["hits"]
        assert {h["_id"] for h in bm25} == {"1", "4"}
        health = client.cluster.health(index=index, wait_for_status="green")
        assert health["status"] == "green"
    finally:
        client.indices.delete(index=index)
        client.close()
