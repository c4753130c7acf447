"""The clients that write history (docs/history.md): the workload's producers and consumers,
the raw-protocol prober, the metadata observer, the wire and Admin clients they use, and the
history writer itself. They know a bootstrap address, never a backend."""
