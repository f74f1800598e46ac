import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.opensearch.Version;
import org.opensearch.common.logging.LogConfigurator;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.plugins.PluginInfo;

/**
 * Starts one OpenSearch 3.x node in this JVM with its modules and plugins loaded from the classpath.
 * Usage: java -cp ... OsNode3 NODE_HOME   (NODE_HOME/config holds opensearch.yml and log4j2.properties)
 *
 * The 2.x launcher (OsNode.java) hands Node plugin classes; 3.x takes PluginInfo descriptors
 * instead and renamed the module plugins to *ModulePlugin, hence a launcher of its own.
 */
public final class OsNode3 {
    static final String DEFAULT_PLUGINS = String.join(",",
        "org.opensearch.transport.Netty4ModulePlugin",
        "org.opensearch.painless.PainlessModulePlugin",
        "org.opensearch.analysis.common.CommonAnalysisModulePlugin",
        "org.opensearch.index.mapper.MapperExtrasModulePlugin",
        "org.opensearch.index.reindex.ReindexModulePlugin",
        "org.opensearch.knn.plugin.KNNPlugin");

    /** Node's plugin-taking constructor is protected, hence the subclass. */
    static final class EmbeddedNode extends Node {
        EmbeddedNode(Environment env, Collection<PluginInfo> plugins) {
            super(env, plugins, true);
        }
    }

    /** A classpath plugin: named after its class, as `_cat/plugins` then lists it (as on 2.x). */
    static PluginInfo classpathPlugin(String className) {
        return new PluginInfo(className, "classpath plugin", "NA", Version.CURRENT,
            Integer.toString(Runtime.version().feature()), className, Collections.emptyList(), false);
    }

    public static void main(String[] args) throws Exception {
        LogConfigurator.registerErrorListener();
        Path home = Paths.get(args[0]).toAbsolutePath();
        Files.createDirectories(home.resolve("logs"));
        Files.createDirectories(home.resolve("data"));

        List<PluginInfo> plugins = new ArrayList<>();
        for (String name : System.getProperty("osnode.plugins", DEFAULT_PLUGINS).split(",")) {
            if (!name.isBlank()) {
                plugins.add(classpathPlugin(name.trim()));
            }
        }

        Settings input = Settings.builder().put("path.home", home.toString()).build();
        Environment env = InternalSettingsPreparer.prepareEnvironment(
            input, Collections.emptyMap(), home.resolve("config"), () -> "node");
        LogConfigurator.setNodeName(Node.NODE_NAME_SETTING.get(env.settings()));
        LogConfigurator.configure(env);

        Node node = new EmbeddedNode(env, plugins);
        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
                node.awaitClose(20, TimeUnit.SECONDS);
            } catch (Exception e) {
                e.printStackTrace();
            }
            stopped.countDown();
        }));
        node.start();
        System.out.println("OSNODE STARTED " + env.settings().get("node.name"));
        stopped.await();
    }
}
