// BrokerJmx prints a Kafka broker's request and byte counters, one
// "name value" line each, for broker-cost.sh to diff over a run.
//
//	java BrokerJmx.java PID         (attaches to the broker's JVM, no JMX port needed)
//	java BrokerJmx.java HOST:PORT   (a broker started with a JMX port)
//
// Lines:
//
//	requests <type> N        kafka.network RequestMetrics RequestsPerSec Count, summed over versions
//	request_bytes <type> N   RequestBytes histogram, Count x Mean (Yammer's mean is over the whole life, so the product is the sum)
//	local_ms <type> N        LocalTimeMs histogram, Count x Mean: time the request handler threads spent (wall, not CPU)
//	net_in N / net_out N     socket-server-metrics incoming/outgoing-byte-total over every listener and processor
//	topic_in N / topic_out N BrokerTopicMetrics BytesInPerSec/BytesOutPerSec Count (record bytes of all topics)
//	messages_in N            BrokerTopicMetrics MessagesInPerSec Count
//
// Only the JDK is needed (the attach API and javax.management).
import com.sun.tools.attach.VirtualMachine;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class BrokerJmx {
    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: java BrokerJmx.java PID|HOST:PORT");
            System.exit(2);
        }
        String url;
        if (args[0].contains(":")) {
            url = "service:jmx:rmi:///jndi/rmi://" + args[0] + "/jmxrmi";
        } else {
            VirtualMachine vm = VirtualMachine.attach(args[0]);
            try {
                url = vm.startLocalManagementAgent();
            } finally {
                vm.detach();
            }
        }
        try (JMXConnector c = JMXConnectorFactory.connect(new JMXServiceURL(url))) {
            print(c.getMBeanServerConnection());
        }
    }

    static void print(MBeanServerConnection s) throws Exception {
        Map<String, Double> out = new TreeMap<>();
        for (ObjectName n : s.queryNames(new ObjectName("kafka.network:type=RequestMetrics,name=RequestsPerSec,*"), null)) {
            add(out, "requests " + n.getKeyProperty("request"), num(s, n, "Count"));
        }
        for (String m : new String[] {"RequestBytes", "LocalTimeMs"}) {
            String key = m.equals("RequestBytes") ? "request_bytes " : "local_ms ";
            for (ObjectName n : s.queryNames(new ObjectName("kafka.network:type=RequestMetrics,name=" + m + ",*"), null)) {
                add(out, key + n.getKeyProperty("request"), num(s, n, "Count") * num(s, n, "Mean"));
            }
        }
        for (ObjectName n : s.queryNames(new ObjectName("kafka.server:type=socket-server-metrics,listener=*,networkProcessor=*"), null)) {
            add(out, "net_in", num(s, n, "incoming-byte-total"));
            add(out, "net_out", num(s, n, "outgoing-byte-total"));
        }
        String[][] topic = {{"BytesInPerSec", "topic_in"}, {"BytesOutPerSec", "topic_out"}, {"MessagesInPerSec", "messages_in"}};
        for (String[] t : topic) {
            ObjectName n = new ObjectName("kafka.server:type=BrokerTopicMetrics,name=" + t[0]);
            add(out, t[1], s.isRegistered(n) ? num(s, n, "Count") : 0);
        }
        for (Map.Entry<String, Double> e : out.entrySet()) {
            System.out.printf("%s %.0f%n", e.getKey(), e.getValue());
        }
    }

    static double num(MBeanServerConnection s, ObjectName n, String attr) {
        try {
            return ((Number) s.getAttribute(n, attr)).doubleValue();
        } catch (Exception e) {
            return 0;
        }
    }

    static void add(Map<String, Double> m, String k, double v) {
        m.merge(k, v, Double::sum);
    }
}
