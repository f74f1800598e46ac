import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.opensearch.common.logging.LogConfigurator;
import org.opensearch.common.settings.Settings;
import org.opensearch.env.Environment;
import org.opensearch.node.InternalSettingsPreparer;
import org.opensearch.node.Node;
import org.opensearch.plugins.Plugin;

/**
 * Starts one OpenSearch 2.19 node in this JVM with its modules and plugins loaded from the classpath.
 * Usage: java -cp ... OsNode NODE_HOME   (NODE_HOME/config holds opensearch.yml and log4j2.properties)
 *
 * The 3.x launcher (OsNode3.java) differs in what Node's protected constructor takes (PluginInfo
 * descriptors there, plugin classes here) and in the module plugins' names (*ModulePlugin); javac
 * checks one source against one line's jars, so each line has its launcher (devcluster/lines.py).
 */
public final class OsNode {
    static final String DEFAULT_PLUGINS = String.join(",",
        "org.opensearch.transport.Netty4Plugin",
        "org.opensearch.painless.PainlessPlugin",
        "org.opensearch.analysis.common.CommonAnalysisPlugin",
        "org.opensearch.index.mapper.MapperExtrasPlugin",
        "org.opensearch.index.reindex.ReindexPlugin",
        "org.opensearch.knn.plugin.KNNPlugin");

    /** Node's plugin-taking constructor is protected, hence the subclass. */
    static final class EmbeddedNode extends Node {
        EmbeddedNode(Environment env, Collection<Class<? extends Plugin>> plugins) {
            super(env, plugins, true);
        }
    }

    public static void main(String[] args) throws Exception {
        LogConfigurator.registerErrorListener();
        Path home = Paths.get(args[0]).toAbsolutePath();
        Files.createDirectories(home.resolve("logs"));
        Files.createDirectories(home.resolve("data"));

        List<Class<? extends Plugin>> plugins = new ArrayList<>();
        for (String name : System.getProperty("osnode.plugins", DEFAULT_PLUGINS).split(",")) {
            if (!name.isBlank()) {
                plugins.add(Class.forName(name.trim()).asSubclass(Plugin.class));
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
