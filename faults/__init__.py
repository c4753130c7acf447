"""The nemesis (`kipcheck.faults`): every fault kind as data with one inject and one heal,
seeded fault schedules, and the `Cluster` protocol (faults/cluster.py) every backend
implements. Imports nothing of kipcheck's but itself and `kipcheck.errors`: the harness
hands it a cluster through the protocol, never the other way round."""
