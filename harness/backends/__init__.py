"""Cluster backends and their hygiene: the Kafka nodes (native processes in network namespaces,
containers, or an external cluster), the distributions and release features they run, the
state file, reaper, sweep (teardown from a state alone) and firewall that leave nothing behind,
and Toxiproxy in front of clients.
They implement `faults.cluster.Cluster`, the one thing faults know of a cluster."""
