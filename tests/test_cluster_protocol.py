"""Every backend is a `faults.cluster.Cluster`, and faults never import the harness.

The protocol check reads the classes, not instances: every protocol member must exist on
the implementation (a method, a property, a class attribute, a dataclass field or an
attribute its __init__ assigns), and every method must accept the protocol's call
(same parameter names, kinds and defaults; extra parameters only with defaults).
"""
from __future__ import annotations

import ast
import inspect
import json
import textwrap
import threading
from pathlib import Path

import pytest

from kipcheck.errors import KipcheckError
from kipcheck.faults import cluster as protocols
from kipcheck.faults.base import FaultSpec
from kipcheck.faults.errors import FaultError
from kipcheck.faults.nemesis import Nemesis
from kipcheck.harness.clients.admin import Admin
from kipcheck.harness.backends.cluster import NativeCluster
from kipcheck.harness.backends.containers import ContainerCluster
from kipcheck.harness.backends.ssh_cluster import SshCluster
from kipcheck.harness.errors import HarnessError
from kipcheck.harness.backends.external import ExternalCluster
from kipcheck.rundir.writer import History
from kipcheck.harness.backends.node import KafkaNode, NodeSpec
from kipcheck.harness.backends.toxiproxy import LinkProxy

ROOT = Path(__file__).resolve().parent.parent

IMPLEMENTATIONS = [
    (protocols.Cluster, NativeCluster),
    (protocols.Cluster, ExternalCluster),
    (protocols.Cluster, ContainerCluster),  # the docker backend
    (protocols.Cluster, SshCluster),  # nodes on other machines
    (protocols.Node, KafkaNode),
    (protocols.NodeSpec, NodeSpec),
    (protocols.LinkProxy, LinkProxy),
    (protocols.Admin, Admin),
]


def _members(protocol: type) -> dict[str, object]:
    """Each public member a protocol declares (methods, properties, annotated attributes)."""
    out: dict[str, object] = {}
    for base in reversed(protocol.__mro__):
        if base in (object,) or base.__module__ == "typing":
            continue
        for name in base.__dict__.get("__annotations__", {}):
            out.setdefault(name, None)
        for name, value in base.__dict__.items():
            if not name.startswith("_"):
                out[name] = value
    return out


def _init_assigns(cls: type) -> set[str]:
    """The `self.X = ...` names of the __init__ of the class and its bases (instance attributes)."""
    names = set()
    for base in cls.__mro__:
        init = base.__dict__.get("__init__")
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(init)))
        except (OSError, TypeError):  # none, or generated (a dataclass's): its fields are read instead
            continue
        names |= _self_assigns(tree)
    return names


def _self_assigns(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, (ast.AnnAssign, ast.AugAssign)) else []
        for t in targets:
            for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                if isinstance(el, ast.Attribute) and isinstance(el.value, ast.Name) and el.value.id == "self":
                    names.add(el.attr)
    return names


def _call_gaps(name: str, wanted: inspect.Signature, got: inspect.Signature) -> list[str]:
    """Why `got` cannot be called as `wanted` is (both without self)."""
    gaps = []
    have = got.parameters
    for p in wanted.parameters.values():
        q = have.get(p.name)
        if q is None:
            gaps.append(f"{name}: no parameter {p.name!r}")
        elif q.kind != p.kind:
            gaps.append(f"{name}: {p.name!r} is {q.kind.description}, the protocol's is {p.kind.description}")
        elif p.default is not inspect.Parameter.empty and q.default != p.default:
            gaps.append(f"{name}: {p.name!r} defaults to {q.default!r}, the protocol's to {p.default!r}")
    wanted_positional = [p.name for p in wanted.parameters.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    got_positional = [p.name for p in have.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
    if got_positional[:len(wanted_positional)] != wanted_positional and not gaps:
        gaps.append(f"{name}: positional order {got_positional}, the protocol's {wanted_positional}")
    for q in have.values():
        if q.name not in wanted.parameters and q.default is inspect.Parameter.empty \
                and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD):
            gaps.append(f"{name}: extra parameter {q.name!r} without a default")
    return gaps


def _without_self(sig: inspect.Signature) -> inspect.Signature:
    return sig.replace(parameters=list(sig.parameters.values())[1:])


def protocol_gaps(protocol: type, cls: type) -> list[str]:
    """Every way `cls` falls short of `protocol` (empty: it implements it)."""
    gaps = []
    fields = set(getattr(cls, "__dataclass_fields__", {}))
    assigned = _init_assigns(cls)
    for name, declared in _members(protocol).items():
        try:
            found = inspect.getattr_static(cls, name)
        except AttributeError:
            found = None
            if name not in fields and name not in assigned:
                gaps.append(f"{name}: missing")
                continue
        if inspect.isfunction(declared):
            if isinstance(found, (staticmethod, classmethod)):
                found = found.__func__
            if not inspect.isfunction(found):
                gaps.append(f"{name}: the protocol's is a method, {cls.__name__}'s is not")
                continue
            gaps += _call_gaps(name, _without_self(inspect.signature(declared)),
                               _without_self(inspect.signature(found)))
        elif inspect.isfunction(found):
            gaps.append(f"{name}: the protocol's is an attribute, {cls.__name__}'s is a method")
    return gaps


@pytest.mark.parametrize("protocol,cls", IMPLEMENTATIONS, ids=lambda x: x.__name__)
def test_backends_implement_the_protocols(protocol, cls):
    assert protocol_gaps(protocol, cls) == []


def test_the_protocol_check_flags_a_backend_that_falls_short():
    """A backend missing a verb, renaming a parameter, requiring one more, or with a method
    where the protocol has an attribute, is named: the check above can fail."""

    class Short:
        mode = "short"

        def __init__(self):
            self.nodes = []

        def brokers(self):
            return []

        def node(self, ident):
            raise FaultError("none")

        def bootstrap_servers(self, extra):
            return ""

        def racks(self):
            return {}

        def kraft_settings(self):
            return {}

        def link_proxy(self, node_id, listener="client"):
            return None

        def controller_voters(self):
            return None

        def remove_voter(self, node_id):
            pass

        def add_voter(self, node_id):
            pass

        def unregister_broker(self, node_id):
            pass

    gaps = protocol_gaps(protocols.Cluster, Short)
    assert "reset_link_proxies: missing" in gaps
    assert "node: no parameter 'node_id'" in gaps
    assert "bootstrap_servers: extra parameter 'extra' without a default" in gaps
    assert "brokers: the protocol's is an attribute, Short's is a method" in gaps
    assert "node: extra parameter 'ident' without a default" in gaps
    assert len(gaps) == 5, gaps


def _layer(module: str) -> str:
    """"kipcheck.checks.verdict" -> "checks"; a bare "checks.verdict" -> "checks" too."""
    parts = module.split(".")
    return parts[1] if parts[0] == "kipcheck" and len(parts) > 1 else parts[0]


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield node.lineno, [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, [node.module]


def test_faults_import_no_harness():
    """Layers import one way: faults see the harness only through faults.cluster, checks see
    only reference_model and the run directory, reference_model and rundir (the bottom) see
    nothing of ours; and every import of ours goes through the one name `kipcheck` (a bare
    `checks` would be a user's package)."""
    ours = {"harness", "faults", "checks", "reports", "reference_model", "rundir"}
    allowed = {"faults": {"faults"}, "checks": {"checks", "reference_model", "rundir"},
               "reference_model": {"reference_model"}, "rundir": {"rundir"},
               "reports": {"reports", "checks", "reference_model", "rundir"}, "harness": ours}
    wrong = []
    for package, may in allowed.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            for lineno, modules in _imports(path):
                wrong += [f"{path.relative_to(ROOT)}:{lineno} imports {m}" for m in modules
                          if _layer(m) in ours - may or m.split(".")[0] in ours]
    assert wrong == []


def test_the_import_check_sees_a_harness_import(tmp_path):
    """The parse above finds imports anywhere in a module, including inside functions."""
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from kipcheck.harness.backends.network import CHAIN\n    import harness.errors as e\n")
    found = [m for _, modules in _imports(source) for m in modules]
    assert found == ["kipcheck.harness.backends.network", "harness.errors"]
    assert [_layer(m) for m in found] == ["harness", "harness"]


def _module_path(root: Path, module: str) -> Path | None:
    """The file of one of our modules ("kipcheck.harness.run" -> harness/run.py); None for anyone else's."""
    parts = module.split(".")
    if parts[0] != "kipcheck" or len(parts) < 2:
        return None
    base = root.joinpath(*parts[1:])
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.exists()), None)


def _runtime_imports(root: Path, path: Path) -> list[tuple[str, bool]]:
    """(our module, imported inside a function) for every import the module can run; `if
    TYPE_CHECKING:` blocks run never. `from package import module` names the module."""
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((a.name, inner) for a in child.names)
            elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
                modules = [f"{child.module}.{a.name}" for a in child.names
                           if _module_path(root, f"{child.module}.{a.name}")]
                found.extend((m, inner) for m in modules or [child.module])
            visit(child, inner)
    visit(ast.parse(path.read_text(), str(path)), False)
    return [(m, inner) for m, inner in found if _module_path(root, m)]


def hidden_circles(root: Path, package: str = "harness") -> list[str]:
    """Each import inside a function whose module imports the importer back, directly or through
    others: a circle the function-level import only hides (it breaks once someone imports early).
    Each module is parsed once (the walk asks for the same modules again and again)."""
    parsed: dict[str, list[str]] = {}

    def imports_of(module: str) -> list[str]:
        if module not in parsed:
            parsed[module] = [m for m, _ in _runtime_imports(root, _module_path(root, module))]
        return parsed[module]

    def reaches(start: str, target: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            module = todo.pop()
            if module == target:
                return True
            if module not in seen:
                seen.add(module)
                todo += imports_of(module)
        return False
    circles = []
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).with_suffix("")
        me = ".".join(["kipcheck", *(rel.parts[:-1] if rel.name == "__init__" else rel.parts)])
        circles += [f"{path.relative_to(root)} -> {m}" for m, inner in _runtime_imports(root, path)
                    if inner and reaches(m, me)]
    return circles


def test_no_function_level_import_hides_a_circle():
    """The cluster's teardown once imported the ssh backend inside a function, and the ssh backend
    imported the cluster: harness.backends.sweep releases what a state records and imports no
    backend's cluster module. Now no import inside a function points back at its importer."""
    assert hidden_circles(ROOT) == []


def test_the_circle_check_sees_one(tmp_path):
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "a.py").write_text("def down():\n    from kipcheck.harness.b import clean\n")
    (tmp_path / "harness" / "b.py").write_text("from kipcheck.harness import c\n")
    (tmp_path / "harness" / "c.py").write_text("from kipcheck.harness.a import down\n")
    (tmp_path / "harness" / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                               "    from kipcheck.harness.e import x\n")
    (tmp_path / "harness" / "e.py").write_text("def f():\n    from kipcheck.harness.d import y\n")
    assert hidden_circles(tmp_path) == ["harness/a.py -> kipcheck.harness.b"]


class _Context:
    """What harness.session.RunContext gives a fault, on an external cluster nobody needs to reach."""

    def __init__(self, cluster):
        self.cluster, self.topic = cluster, "t"

    def admin(self):
        raise AssertionError("a node id target needs no admin call")

    def leader_of(self, topic, partition):
        raise AssertionError("not asked")


def test_a_harness_error_from_a_cluster_verb_is_a_known_reason_to_the_nemesis(tmp_path):
    """HarnessError and FaultError share one root, KipcheckError (neither is the other): a cluster
    verb (harness code) that fails inside a fault with a HarnessError is recorded by the nemesis
    as a known reason (info, not internal)."""
    assert issubclass(HarnessError, KipcheckError) and issubclass(FaultError, KipcheckError)
    assert not issubclass(HarnessError, FaultError) and not issubclass(FaultError, HarnessError)

    class Gone(ExternalCluster):
        def node(self, node_id):
            raise HarnessError(f"node {node_id}: its process is gone")

    with History(tmp_path / "history.jsonl") as history:
        nemesis = Nemesis(_Context(Gone("127.0.0.1:1")), [], history, threading.Event())
        nemesis.apply(FaultSpec("kill", 0, 1, {"target": 1}))
    [(spec, error)] = nemesis.failed
    assert error == "node 1: its process is gone"
    records = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    [info] = [r for r in records if r["type"] == "info"]
    assert info["value"]["error"] == error and "internal" not in info["value"]


@pytest.mark.parametrize("kind,message", [
    ("kill", "this fault needs node access: use the native backend"),
    ("partition", "this fault needs node access: use the native backend"),
    ("latency", "client link faults need a cluster with proxies in front of that listener"),
    ("replication-latency", "replication link faults need a cluster with proxies in front of that listener"),
    ("controller-latency", "controller link faults need a cluster with proxies in front of that listener"),
])
def test_the_external_backend_refuses_node_and_link_faults_in_one_line(tmp_path, kind, message):
    """The nemesis records the external backend's refusal as a known reason (info, not internal)."""
    cluster = ExternalCluster("127.0.0.1:1")
    params = {"target": "all"} if kind.endswith("latency") else {"target": 1}
    with History(tmp_path / "history.jsonl") as history:
        nemesis = Nemesis(_Context(cluster), [], history, threading.Event())
        nemesis.apply(FaultSpec(kind, 0, 1, params))
    [(spec, error)] = nemesis.failed
    records = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    info = [r for r in records if r["type"] == "info"]
    assert len(info) == 1
    assert error.startswith(message) and "\n" not in error
    assert "internal" not in info[0]["value"]


# -- backends: one object each, behind one protocol (harness.backends.backend) -----------------

from dataclasses import fields, replace  # noqa: E402

from kipcheck.faults.registry import KINDS  # noqa: E402
from kipcheck.harness.backends import registry  # noqa: E402
from kipcheck.harness.backends.backend import Backend, Capabilities  # noqa: E402
from kipcheck.harness.run import RunOptions, _prepare  # noqa: E402


class _Quiet:
    def note(self, text):
        pass


def _one_line_refusal(call) -> str:
    with pytest.raises(KipcheckError) as e:  # a HarnessError, or a FaultError for the fault kinds
        call()
    line = str(e.value)
    assert line and "\n" not in line
    return line


@pytest.mark.parametrize("name", registry.names())
def test_every_registered_backend_is_a_backend_with_every_capability_declared(name):
    backend = registry.get(name)
    assert isinstance(backend, Backend) and backend.name == name
    assert isinstance(backend.capabilities, Capabilities)
    for f in fields(Capabilities):  # declared, none left to a default
        assert getattr(backend.capabilities, f.name) is not None or f.name == "tiered_refused", f.name
    for member in ("prepare", "complete", "reach", "cluster", "start"):
        assert callable(getattr(backend, member))
    assert type(backend).cluster is not Backend.cluster, "a backend makes its own cluster"
    faults = backend.capabilities.faults
    if faults.kinds is not None:  # every kind it cannot run has a reason
        assert set(faults.kinds) <= set(KINDS)
        assert all(faults.why_not(k) for k in KINDS if k not in faults.kinds)


@pytest.mark.parametrize("name", registry.names())
def test_every_registered_backend_refuses_bad_options_in_one_line(name, tmp_path):
    backend = registry.get(name)
    caps = backend.capabilities
    good = replace(RunOptions(backend=name), bootstrap="127.0.0.1:1", hosts=str(_hosts_file(tmp_path)))
    assert backend.prepare(good).backend == name  # nothing reached: prepare is pure
    runs_it = caps.faults.kinds is None or "broker-decommission" in caps.faults.kinds  # else skipped, not refused
    if caps.starts_kafka and runs_it:
        assert "--brokers 4" in _one_line_refusal(lambda: _prepare(replace(good, faults=["broker-decommission"]),
                                                                   _Quiet()))
    if caps.tiered_refused:
        assert _one_line_refusal(lambda: backend.prepare(replace(good, tiered=True))) == caps.tiered_refused
    if not caps.upgrades:
        assert name in _one_line_refusal(lambda: registry.prepare(replace(good, upgrade_from="3.9.2",
                                                                          upgrade_to="4.3.1")))
    for missing in ("bootstrap", "hosts"):  # a backend that needs it names it
        stripped = replace(good, **{missing: None})
        try:
            backend.prepare(stripped)
        except HarnessError as e:
            assert f"--{missing}" in str(e) and "\n" not in str(e)


def _hosts_file(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"nodes": [
        {"externally_routable_ip": f"192.0.2.{i}", "ssh_config": {"host": f"w{i}", "hostname": f"192.0.2.{i}"}}
        for i in (1, 2, 3)]}))
    return path


def test_an_unknown_backend_is_one_line_naming_the_known():
    line = _one_line_refusal(lambda: registry.get("kubernetes"))
    assert all(n in line for n in registry.names())


def test_the_run_and_the_session_never_name_a_backend_nor_probe_the_cluster():
    """The run asks its Backend (capabilities, prepare, cluster); a new backend changes neither file."""
    for path in (ROOT / "harness" / "run.py", ROOT / "harness" / "session.py"):
        source = path.read_text()
        for name in registry.names():
            assert f'"{name}"' not in source and f"'{name}'" not in source, f"{path.name} names {name}"
        assert "getattr(cluster" not in source and "hasattr(" not in source, path.name


#: The walk of `kipcheck run --faults X` from the command line to the nemesis, and where it crosses
#: from the harness into faults: once when the options are checked (faults.plan.FaultPlan, carried
#: from there), once for the context the session hands the plan's nemesis (faults.base.FaultContext).
FAULTS_WALK = ("harness/cli.py", "harness/run.py", "harness/session.py", "harness/service.py",
               "harness/backends/backend.py", "harness/backends/registry.py",
               *(f"harness/backends/{name}_backend.py" for name in ("native", "external", "containers", "ssh")))
FAULTS_CROSSINGS = {("harness/run.py", "kipcheck.faults.plan"), ("harness/session.py", "kipcheck.faults.base")}


def test_the_walk_of_faults_crosses_into_faults_twice():
    """Every import of faults the walk runs (a type named for the checker only runs never)."""
    crossings = {(path, module) for path in FAULTS_WALK for module, _ in _runtime_imports(ROOT, ROOT / path)
                 if _layer(module) == "faults"}
    assert crossings == FAULTS_CROSSINGS


def test_the_command_line_offers_the_registered_backends():
    from kipcheck.harness.cli import build_parser
    run = next(a for a in build_parser()._subparsers._group_actions[0].choices["run"]._actions
               if a.dest == "backend")
    assert tuple(run.choices) == registry.names() and run.default == registry.DEFAULT
