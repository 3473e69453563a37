/*
 * A small launcher for a single OpenSearch node assembled from Maven Central jars.
 *
 * OpenSearch's own launcher (org.opensearch.bootstrap.OpenSearch) expects a distribution
 * layout: modules/ with plugin descriptors, a security-manager policy, jar-hell checks. The
 * Maven artifacts carry the server and the client jars of the modules but no descriptors, so
 * this class starts the node the way OpenSearch's own test framework does (MockNode): a Node
 * subclass handed the module plugin classes directly, all on one class path.
 *
 * Usage: java -cp <libs/*>:<this dir> VoxwireOpenSearch <path.home> [PluginClass ...]
 *   <path.home>/config/opensearch.yml holds the settings (written by scripts/services.sh).
 * Logs: <path.home>/config/log4j2.properties (the script's logs to stdout, which it redirects
 * into .services/opensearch/log).
 * SIGTERM closes the node cleanly (shutdown hook), then the JVM exits.
 *
 * scripts/services.sh compiles this file with javac on first start; it is not part of voxwire.
 */

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

public final class VoxwireOpenSearch {

    /** Node's plugin-taking constructor is protected: this subclass opens it. */
    static final class ClasspathPluginNode extends Node {
        ClasspathPluginNode(Environment environment, Collection<Class<? extends Plugin>> plugins) {
            super(environment, plugins, true);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            System.err.println("usage: VoxwireOpenSearch <path.home> [PluginClass ...]");
            System.exit(2);
        }
        Path home = Paths.get(args[0]).toAbsolutePath();
        List<Class<? extends Plugin>> plugins = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            plugins.add(Class.forName(args[i]).asSubclass(Plugin.class));
        }

        Settings initial = Settings.builder().put("path.home", home.toString()).build();
        Environment environment = InternalSettingsPreparer.prepareEnvironment(
            initial, Collections.emptyMap(), home.resolve("config"), () -> "voxwire-opensearch");

        // log4j2.properties from the config folder (the script writes one that logs to stdout)
        LogConfigurator.registerErrorListener();
        LogConfigurator.setNodeName(Node.NODE_NAME_SETTING.get(environment.settings()));
        LogConfigurator.configure(environment);

        final Node node = new ClasspathPluginNode(environment, plugins);
        final CountDownLatch closed = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                node.close();
                node.awaitClose(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                e.printStackTrace();
            } finally {
                closed.countDown();
            }
        }, "voxwire-opensearch-shutdown"));

        try {
            node.start();
        } catch (Throwable t) {
            t.printStackTrace();
            System.exit(1);
        }
        System.out.println("voxwire-opensearch: node started");
        closed.await();
    }
}
