package dev.cognis.opensearch;

import java.util.HashMap;
import java.util.Map;

import org.opensearch.index.mapper.Mapper;
import org.opensearch.index.mapper.MapperParsingException;
import org.opensearch.index.mapper.ObjectMapper;
import org.opensearch.knn.plugin.KNNPlugin;

/**
 * The k-NN plugin, but a {@code knn_vector} field in a k-NN index ({@code index.knn: true}) must say
 * {@code "method": {"engine": "lucene", ...}}.
 *
 * Why: this node has no JNI libraries for the native engines. Without this check a mapping that
 * names faiss or nmslib, or names no engine (2.19 then defaults to faiss), is accepted, and the
 * first write to it fails with UnsatisfiedLinkError deep in a Lucene flush, closes the shard's
 * IndexWriter and leaves the HTTP request hanging. Rejecting the mapping up front turns that into
 * a clear 400 at index creation. Fields in indices without {@code index.knn} (flat vectors for
 * exact scoring scripts) are left alone.
 */
public class LuceneOnlyKNNPlugin extends KNNPlugin {

    static final String FIELD_TYPE = "knn_vector";

    @Override
    public Map<String, Mapper.TypeParser> getMappers() {
        Map<String, Mapper.TypeParser> mappers = new HashMap<>(super.getMappers());
        Mapper.TypeParser inner = mappers.get(FIELD_TYPE);
        if (inner != null) {
            mappers.put(FIELD_TYPE, new Guard(inner));
        }
        return mappers;
    }

    static final class Guard implements Mapper.TypeParser {
        private final Mapper.TypeParser inner;

        Guard(Mapper.TypeParser inner) {
            this.inner = inner;
        }

        @Override
        public Mapper.Builder<?> parse(String name, Map<String, Object> node, ParserContext context) {
            check(name, node, context);
            return inner.parse(name, node, context);
        }

        @Override
        public Mapper.Builder<?> parse(String name, Map<String, Object> node, ParserContext context,
                                       ObjectMapper.Builder objBuilder) {
            check(name, node, context);
            return inner.parse(name, node, context, objBuilder);
        }

        private static void check(String name, Map<String, Object> node, ParserContext context) {
            if (!context.getSettings().getAsBoolean("index.knn", false)) {
                return;
            }
            Object method = node.get("method");
            Object engine = method instanceof Map ? ((Map<?, ?>) method).get("engine") : null;
            if (!"lucene".equals(engine)) {
                String got = node.containsKey("model_id") ? "a model_id"
                    : method == null ? "no method (2.19 defaults to faiss)"
                    : engine == null ? "no engine (2.19 defaults to faiss)"
                    : "engine [" + engine + "]";
                throw new MapperParsingException(
                    "knn_vector field [" + name + "] has " + got + ": this local OpenSearch node has no native "
                        + "k-NN libraries, so every knn_vector mapping in an index.knn index must use "
                        + "\"method\": {\"name\": \"hnsw\", \"engine\": \"lucene\", ...}"
                );
            }
        }
    }
}
