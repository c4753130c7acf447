// KIP-853 voter changes through Kafka's own Admin client (kafka-clients on the cluster's classpath),
// run by harness/backends/quorum.py (compiled once into kipcheck's cache, or in source-file mode).
//   describe BOOTSTRAP                      -> one line per voter: "voter <id> <directory id>",
//                                              one per observer: "observer <id> <directory id>", then "leader <id>"
//   remove BOOTSTRAP ID DIRECTORY_ID        -> "ok", or "error <class>: <message>" and exit 1
//   add BOOTSTRAP ID DIRECTORY_ID LISTENER HOST PORT
//   unregister BOOTSTRAP ID                 -> "ok": a stopped broker decommissioned (UnregisterBroker)
// BOOTSTRAP is the controllers' endpoints (bootstrap.controllers, KIP-919), and for unregister the
// brokers' (bootstrap.servers: a broker forwards the call to the active controller).
import java.time.Duration;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.QuorumInfo;
import org.apache.kafka.clients.admin.RaftVoterEndpoint;
import org.apache.kafka.common.Uuid;

public class QuorumVoters {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.put(args[0].equals("unregister") ? "bootstrap.servers" : "bootstrap.controllers", args[1]);
        props.put("request.timeout.ms", "15000");
        props.put("default.api.timeout.ms", "30000");
        // the close is bounded (an Admin closed without a timeout waits for every call it still holds;
        // a CI describe right after the leader removed itself hung past 120 s, 2026-11-30), and the
        // JVM exits whatever threads are left
        Admin admin = Admin.create(props);
        int status = 0;
        try {
            switch (args[0]) {
                case "describe" -> {
                    QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get(30, TimeUnit.SECONDS);
                    for (QuorumInfo.ReplicaState v : q.voters())
                        System.out.println("voter " + v.replicaId() + " " + v.replicaDirectoryId());
                    for (QuorumInfo.ReplicaState o : q.observers())
                        System.out.println("observer " + o.replicaId() + " " + o.replicaDirectoryId());
                    System.out.println("leader " + q.leaderId());
                }
                case "remove" -> admin.removeRaftVoter(Integer.parseInt(args[2]), Uuid.fromString(args[3]))
                        .all().get(60, TimeUnit.SECONDS);
                case "add" -> admin.addRaftVoter(Integer.parseInt(args[2]), Uuid.fromString(args[3]),
                        Set.of(new RaftVoterEndpoint(args[4], args[5], Integer.parseInt(args[6]))))
                        .all().get(60, TimeUnit.SECONDS);
                case "unregister" -> admin.unregisterBroker(Integer.parseInt(args[2])).all().get(60, TimeUnit.SECONDS);
                default -> throw new IllegalArgumentException("unknown command " + args[0]);
            }
            if (!args[0].equals("describe")) System.out.println("ok");
        } catch (ExecutionException e) {
            System.out.println("error " + e.getCause().getClass().getSimpleName() + ": " + e.getCause().getMessage());
            status = 1;
        } catch (TimeoutException e) {
            System.out.println("error TimeoutException: no answer from the quorum in time");
            status = 1;
        } finally {
            admin.close(Duration.ofSeconds(5));
        }
        System.out.flush();
        System.exit(status);
    }
}
