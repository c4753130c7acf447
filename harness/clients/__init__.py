"""The clients that write history (docs/history.md): the workload's producers and consumers,
the raw-protocol prober, the metadata observer, and the wire and Admin clients they use; they
write through `rundir.writer`. They know a bootstrap address, never a backend."""
