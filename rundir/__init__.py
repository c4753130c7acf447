"""The run directory's one owner: what a run leaves and how it is written and read.

- `rundir.records`: the record types and the file names of a run directory;
- `rundir.writer`: the history recorder (JSONL, one line per invoke or completion), which the
  harness's clients write through;
- `rundir.history`: reading and validating a history (JSONL or Parquet), and the Parquet
  conversion the Spark engine reads;
- `rundir.config`: config.json, the run's description (`RunConfig`).

The bottom layer: it imports nothing of kipcheck's but `kipcheck.errors`, and the harness,
the checker and the reports import it. Field names and meanings: docs/history.md.
"""
