"""kipcheck: a chaos and conformance test harness for Apache Kafka (KRaft) fetch semantics.

One import name for the whole tool, so a user's own `checks` or `reports` package never
collides with ours. The repository keeps the design's top-level folders; each is a subpackage
here, and may import only what is listed:

- `kipcheck.errors`: `KipcheckError`, the root of our one-line errors (nothing of ours; every layer
  may import it);
- `kipcheck.rundir`: the run directory's one owner: record types, the history writer and
  reader, config.json (nothing of ours);
- `kipcheck.reference_model`: the KIP semantics as a pure model (nothing of ours);
- `kipcheck.checks`: the checker, its rules and both engines (reference_model, rundir);
- `kipcheck.faults`: the nemesis, every fault with its heal, and the `Cluster` protocol (faults);
- `kipcheck.reports`: the HTML report and Allure results (checks, rundir);
- `kipcheck.harness`: cluster backends, clients, runs, the CLI and the pytest plugin (all).

An installed wheel holds them under kipcheck/ (pyproject's package-dir mapping). In a source
checkout they stay at the repository's top level, and this package's path reaches them.
"""
from pathlib import Path as _Path

_checkout = _Path(__file__).resolve().parent.parent
if (_checkout / "pyproject.toml").is_file() and (_checkout / "harness" / "__init__.py").is_file():
    __path__.append(str(_checkout))  # noqa: F821 (a package's own __path__)
