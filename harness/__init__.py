"""kipcheck's harness (`kipcheck.harness`, the top layer: it may import every other one), in
three groups, each importing only the ones below it:

- `harness.backends`: the cluster backends and their hygiene (nodes, distributions,
  release features, state, reaper, firewall, Toxiproxy); they implement
  `faults.cluster.Cluster`.
- `harness.clients`: the clients that write history (workload, prober, observer, wire,
  Admin), through `rundir.writer`.
- the modules here: the run orchestration on top of faults, backends and clients (run,
  service, campaign, reproduce, selftest, verify), the CLI and the pytest plugin, with
  their shared leaves (`errors`, `runlog`, `progress`) and `session`: what a run, the
  selftest and the pytest plugin share (the fault context, topic set-up, the follower
  rack, the drive loop). No module imports another's underscore name.
"""
