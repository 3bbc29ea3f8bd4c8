package dev.cognis.opensearch;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import org.opensearch.common.logging.LogConfigurator;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.analysis.common.CommonAnalysisPlugin;
import org.opensearch.index.mapper.MapperExtrasPlugin;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.painless.PainlessPlugin;
import org.opensearch.plugins.Plugin;
import org.opensearch.transport.Netty4Plugin;

/**
 * A single-node OpenSearch 2.19 for local tests and development, started in a plain JVM from Maven
 * Central jars. The plugins are passed as classpath plugins to Node's protected constructor, which is
 * how OpenSearch's own test framework starts nodes (no plugin directory, no jar-hell check).
 *
 * Usage:
 *   java [jvm flags] -cp 'target/classes:target/lib/*:target/knn/*' dev.cognis.opensearch.LocalNode \
 *        --home DIR [--http-port N] [--transport-port N] [-Ekey=value ...]
 *
 * Every option can also come from a system property: -Dcognis.opensearch.home, .http.port,
 * .transport.port. Defaults: http 9200, transport 9300, home ./.opensearch-home.
 * The node stops cleanly on SIGTERM/SIGINT (shutdown hook).
 */
public final class LocalNode extends Node {

    static final String NODE_NAME = "cognis-local-node";
    static final String KNN_PLUGIN_CLASS = "dev.cognis.opensearch.LuceneOnlyKNNPlugin";

    /** The classpath plugins. k-NN has no native engine here (no JNI libraries): use engine "lucene". */
    static List<Class<? extends Plugin>> plugins() {
        List<Class<? extends Plugin>> plugins = new ArrayList<>(
            Arrays.asList(Netty4Plugin.class, CommonAnalysisPlugin.class, PainlessPlugin.class, MapperExtrasPlugin.class)
        );
        // k-NN is published as a plugin ZIP (unpacked to target/knn by the build), not as a Maven jar, so
        // its jars are not on the Maven runtime classpath: load the (guarded) plugin by name and say what
        // is missing when target/knn/* was left off the -cp.
        try {
            plugins.add(Class.forName(KNN_PLUGIN_CLASS).asSubclass(Plugin.class));
        } catch (ClassNotFoundException | NoClassDefFoundError e) {
            throw new IllegalStateException(
                KNN_PLUGIN_CLASS + " is not on the classpath: add target/knn/* (run `mvn -q -B package` first)", e
            );
        }
        return Collections.unmodifiableList(plugins);
    }

    LocalNode(Environment environment, Collection<Class<? extends Plugin>> plugins) {
        super(environment, plugins, true);
    }

    private static void usage(String message) {
        System.err.println("error: " + message);
        System.err.println(
            "usage: LocalNode --home DIR [--http-port N] [--transport-port N] [--cluster-name NAME] [-Ekey=value ...]"
        );
        System.exit(2);
    }

    static Settings buildSettings(String[] args) throws Exception {
        String home = System.getProperty("cognis.opensearch.home", ".opensearch-home");
        String httpPort = System.getProperty("cognis.opensearch.http.port", "9200");
        String transportPort = System.getProperty("cognis.opensearch.transport.port", "9300");
        String clusterName = System.getProperty("cognis.opensearch.cluster.name", "cognis-local");
        Settings.Builder extra = Settings.builder();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (a.startsWith("-E")) {
                String kv = a.substring(2);
                int eq = kv.indexOf('=');
                if (eq <= 0) usage("bad setting " + a);
                extra.put(kv.substring(0, eq), kv.substring(eq + 1));
                continue;
            }
            if (i + 1 >= args.length) usage("missing value for " + a);
            String v = args[++i];
            switch (a) {
                case "--home": home = v; break;
                case "--http-port": httpPort = v; break;
                case "--transport-port": transportPort = v; break;
                case "--cluster-name": clusterName = v; break;
                default: usage("unknown option " + a);
            }
        }
        Path homePath = Paths.get(home).toAbsolutePath();
        Path config = homePath.resolve("config");
        Files.createDirectories(config);
        Files.createDirectories(homePath.resolve("plugins"));
        Files.createDirectories(homePath.resolve("data"));
        Files.createDirectories(homePath.resolve("logs"));

        return Settings.builder()
            .put("path.home", homePath.toString())
            .put("path.data", homePath.resolve("data").toString())
            .put("path.logs", homePath.resolve("logs").toString())
            .put("cluster.name", clusterName)
            .put("node.name", NODE_NAME)
            .put("discovery.type", "single-node")
            .put("network.host", "127.0.0.1")
            .put("http.port", httpPort)
            .put("transport.port", transportPort)
            // One node: replicas could never be assigned, and indices would stay yellow.
            .put("cluster.default_number_of_replicas", 0)
            .put("knn.model.index.number_of_replicas", 0)
            // Tests must not flip indices to read-only because the shared disk is busy.
            .put("cluster.routing.allocation.disk.threshold_enabled", false)
            .put("action.destructive_requires_name", false)
            .put(extra.build())
            .build();
    }

    /** Log INFO and above to stdout (the caller redirects it to a file); never overwrites a user's file. */
    static void writeLoggingConfig(Path configDir) throws Exception {
        Path file = configDir.resolve("log4j2.properties");
        if (Files.exists(file)) return;
        String text = String.join(
            "\n",
            "status = error",
            "appender.console.type = Console",
            "appender.console.name = console",
            "appender.console.layout.type = PatternLayout",
            "appender.console.layout.pattern = [%d{ISO8601}][%-5p][%-25c{1.}] [%node_name]%marker %m%n",
            "rootLogger.level = info",
            "rootLogger.appenderRef.console.ref = console",
            ""
        );
        Files.write(file, text.getBytes(java.nio.charset.StandardCharsets.UTF_8));
    }

    public static void main(String[] args) throws Exception {
        Settings settings = buildSettings(args);
        writeLoggingConfig(Paths.get(settings.get("path.home")).resolve("config"));
        LogConfigurator.registerErrorListener();
        LogConfigurator.setNodeName(NODE_NAME);
        Environment environment = InternalSettingsPreparer.prepareEnvironment(
            settings, Collections.emptyMap(), null, () -> NODE_NAME
        );
        LogConfigurator.configure(environment);

        final CountDownLatch stopped = new CountDownLatch(1);
        final LocalNode node = new LocalNode(environment, plugins());
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                stopped.countDown();
            }
        }, "cognis-local-node-shutdown"));
        try {
            node.start();
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);
        }
        // cluster.default_number_of_replicas is read from the cluster metadata, not from node settings:
        // persist it so that every index created without an explicit replica count gets 0 replicas.
        node.client()
            .admin()
            .cluster()
            .prepareUpdateSettings()
            .setPersistentSettings(Settings.builder().put("cluster.default_number_of_replicas", 0))
            .get();
        System.out.println("cognis local OpenSearch node started: http://" + settings.get("network.host") + ":"
            + settings.get("http.port"));
        System.out.flush();
        stopped.await();
    }
}
