"""Bad input gets one line on stderr and exit code 2, never a traceback."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parent.parent


def kipcheck(*args, env=None, cwd=None):
    """The CLI in a subprocess; from another `cwd`, still this checkout's code (PYTHONPATH)."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-m", "kipcheck.harness.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": path, **(env or {})}, timeout=120, cwd=cwd)
    return proc.returncode, proc.stdout, proc.stderr


def no_java(tmp_path):
    """An environment without java: a bad option that slipped through fails on java, and starts no cluster."""
    return {"JAVA_HOME": str(tmp_path / "nojdk"), "PATH": "/usr/bin/nothing"}


def assert_argparse_error(code, err, *words):
    """argparse's refusal: exit 2 and one `error:` line naming the option (no usage above it)."""
    assert_one_line_error(code, err, " error: ", *words)


def assert_one_line_error(code, err, *words):
    assert code == 2, err
    assert "Traceback" not in err
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    for w in words:
        assert w in lines[0], lines[0]


def test_unknown_fault_lists_the_known_ones(tmp_path):
    code, _, err = kipcheck("run", "--faults", "partition,meteor", "--runs-dir", str(tmp_path))
    assert_one_line_error(code, err, "meteor", "partition")
    assert not any(tmp_path.iterdir()), "nothing should start for a bad command line"


def test_malformed_history_line_is_named(tmp_path):
    good = '{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":{"topic":"t","partition":0,"key":"a","value":"a"}}'
    (tmp_path / "history.jsonl").write_text(good + "\n" + '{"index":1,"time":2,"proc' + "\n")
    code, _, err = kipcheck("check", str(tmp_path / "history.jsonl"))
    assert_one_line_error(code, err, "2")


def test_missing_java_is_one_line(tmp_path):
    env = {"JAVA_HOME": str(tmp_path / "nojdk"), "PATH": "/usr/bin/nothing"}
    code, _, err = kipcheck("run", "--kafka-version", "4.3.1", "--runs-dir", str(tmp_path), env=env)
    assert_one_line_error(code, err, "java")
    assert not any(tmp_path.iterdir())


def test_elr_on_a_release_without_it_is_one_line_and_starts_nothing(tmp_path):
    code, _, err = kipcheck("run", "--kafka-version", "3.9.2", "--elr", "off", "--runs-dir", str(tmp_path))
    assert_one_line_error(code, err, "3.9.2", "KIP-966", "drop --elr")
    assert not any(tmp_path.iterdir())


def test_consumer_group_protocol_on_a_release_without_it_is_one_line_and_starts_nothing(tmp_path):
    code, _, err = kipcheck("run", "--kafka-version", "3.9.2", "--group-protocol", "consumer",
                            "--runs-dir", str(tmp_path))
    assert_one_line_error(code, err, "3.9.2", "KIP-848", "drop --group-protocol consumer")
    assert not any(tmp_path.iterdir())


def test_share_workload_on_a_release_without_share_groups_is_one_line_and_starts_nothing(tmp_path):
    code, _, err = kipcheck("run", "--kafka-version", "4.1.2", "--workload", "share", "--runs-dir", str(tmp_path))
    assert_one_line_error(code, err, "4.1.2", "KIP-932", "--workload")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("option, version, words", [
    (("--workload", "share"), "4.1.2", ("KIP-932",)),
    (("--group-protocol", "consumer"), "3.9.2", ("KIP-848", "drop --group-protocol consumer"))])
def test_a_campaign_refuses_a_run_its_release_cannot_do_before_any_run_starts(tmp_path, option, version, words):
    """The bad run is planned second: the first (4.3.1 can do it) must not start either."""
    code, _, err = kipcheck("campaign", "--seeds", "1", "--kafka-versions", f"4.3.1,{version}", *option,
                            "--dir", str(tmp_path / "c"), "--quiet")
    assert_one_line_error(code, err, f"kafka-{version}__faults-default__seed-1", *words)
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("asked, version, resolved", [
    (None, "4.0.2", "consumer"), (None, "3.9.2", "classic"), (None, "unknown", "classic"),
    ("classic", "4.3.1", "classic"), ("consumer", "4.0.2", "consumer"), ("consumer", "unknown", "consumer")])
def test_the_group_protocol_is_the_releases_unless_asked(asked, version, resolved):
    from kipcheck.harness.run import group_protocol
    assert group_protocol(asked, version) == resolved


def test_broker_decommission_on_three_brokers_is_one_line_and_starts_nothing(tmp_path):
    code, _, err = kipcheck("run", "--faults", "kill,broker-decommission", "--runs-dir", str(tmp_path))
    assert_one_line_error(code, err, "broker-decommission", "4 brokers", "--brokers 4")
    assert not any(tmp_path.iterdir())


def test_unknown_profile_for_run_starts_nothing(tmp_path):
    code, _, err = kipcheck("run", "--profile", "kafka-9.9", "--duration", "5", "--runs-dir", str(tmp_path))
    assert_one_line_error(code, err, "--profile", "kafka-9.9", "kafka-4.3")
    assert not any(tmp_path.iterdir())


def test_kafka_version_that_does_not_exist(tmp_path):
    code, _, err = kipcheck("run", "--kafka-version", "0.0.1", "--runs-dir", str(tmp_path))
    assert_one_line_error(code, err, "0.0.1")


@pytest.mark.parametrize("version", ["newest", "4.3"])
def test_malformed_kafka_version(tmp_path, version):
    code, _, err = kipcheck("run", "--kafka-version", version, "--runs-dir", str(tmp_path))
    assert_one_line_error(code, err, version)


def test_latest_with_no_listing_is_one_line_and_starts_nothing(tmp_path):
    listing = (tmp_path / "absent.xml").as_uri()  # what an offline machine sees
    code, _, err = kipcheck("run", "--kafka-version", "latest", "--runs-dir", str(tmp_path / "runs"),
                            env={"KIPCHECK_MAVEN_METADATA": listing})
    assert_one_line_error(code, err, "cannot read Kafka versions", "absent.xml", "--kafka-version X.Y.Z")
    assert not (tmp_path / "runs").exists()


def test_unreachable_external_cluster(tmp_path):
    code, _, err = kipcheck("run", "--backend", "external", "--bootstrap", "127.0.0.1:1", "--runs-dir", str(tmp_path))
    assert_one_line_error(code, err, "cannot reach", "127.0.0.1:1")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("scenario, words", [
    ('{"steps": [{"op": "bogus"}]}', ["step 0", "bogus"]),
    ('{"steps": [{"nop": 1}]}', ["step 0", "op"]),
    ('[1]', ["JSON object"]),
    ('{"steps": [', ["cannot read"]),
])
def test_bad_model_scenario_names_the_step(tmp_path, scenario, words):
    path = tmp_path / "s.json"
    path.write_text(scenario)
    code, _, err = kipcheck("model", "replay", str(path))
    assert_one_line_error(code, err, *words)


def test_unknown_profile_for_check(tmp_path):
    good = '{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":{"topic":"t","partition":0,"key":"a","value":"a"}}'
    (tmp_path / "history.jsonl").write_text(good + "\n")
    code, _, err = kipcheck("check", str(tmp_path / "history.jsonl"), "--profile", "kafka-9.9")
    assert_one_line_error(code, err, "kafka-9.9")


def test_report_of_a_damaged_run_is_one_line(tmp_path):
    code, _, err = kipcheck("report", str(tmp_path))
    assert_one_line_error(code, err, "not a run directory")
    (tmp_path / "history.jsonl").write_text('{"index": 0, "time": 1}\n')
    code, _, err = kipcheck("report", str(tmp_path))
    assert_one_line_error(code, err, "history.jsonl:1", "process")
    (tmp_path / "history.jsonl").write_text(
        '{"index": 0, "time": 1, "process": 0, "type": "invoke", "f": "send", "value": {}}\n')
    (tmp_path / "verdict.json").write_text('{"valid": tr')
    code, _, err = kipcheck("report", str(tmp_path))
    assert_one_line_error(code, err, "damaged")


def test_a_bad_share_group_is_refused_and_starts_nothing(tmp_path):
    code, _, err = kipcheck("run", "--workload", "share", "--share-group", "two words", "--runs-dir", str(tmp_path))
    assert code == 2 and "Traceback" not in err
    assert "--share-group" in err.splitlines()[-1] and "two words" in err.splitlines()[-1], err  # argparse's error line
    code, _, err = kipcheck("run", "--share-group", "kipcheck-share-1", "--runs-dir", str(tmp_path))
    assert_one_line_error(code, err, "--share-group", "--workload share")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command, option, value", [
    ("run", "--duration", "nan"), ("run", "--duration", "inf"), ("run", "--intensity", "nan"),
    ("run", "--rate", "inf"), ("run", "--rate", "nan"), ("selftest", "--window", "nan"), ("selftest", "--window", "inf")])
def test_a_number_that_is_not_finite_is_refused_and_starts_nothing(tmp_path, command, option, value):
    """float() reads nan and inf; a run of --duration nan would never end."""
    code, _, err = kipcheck(command, f"{option}={value}", "--runs-dir", str(tmp_path / "runs"), "--quiet",
                            env=no_java(tmp_path), cwd=tmp_path)
    assert_argparse_error(code, err, option, "finite", value)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("args, option, words", [
    (("campaign", "--seeds", "1", "--brokers", "0"), "--brokers", ("> 0",)),
    (("campaign", "--seeds", "1", "--brokers", "-2"), "--brokers", ("> 0",)),
    (("campaign", "--seeds", "1", "--duration", "nan"), "--duration", ("finite",)),
    (("qualify", "--kafka-version", "4.3.1", "--duration", "nan"), "--duration", ("finite",)),
    (("qualify", "--kafka-version", "4.3.1", "--duration", "0"), "--duration", ("> 0",))])
def test_a_campaign_and_a_qualification_check_their_numbers_as_run_does(tmp_path, args, option, words):
    """A campaign's --brokers was a plain int and its --duration a plain float: 0 brokers was worded as a
    fault's shortage, and a --duration of nan started the runs."""
    code, _, err = kipcheck(*args, "--dir", str(tmp_path / "d"), "--quiet", env=no_java(tmp_path), cwd=tmp_path)
    assert_argparse_error(code, err, option, *words)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("args", [("campaign", "--seeds", "1"), ("qualify", "--kafka-version", "4.3.1")])
def test_master_without_the_spark_engine_is_refused_and_starts_nothing(tmp_path, args):
    """A campaign took --master with the local engine, left it unused and started its runs."""
    code, _, err = kipcheck(*args, "--master", "spark://host:7077", "--dir", str(tmp_path / "d"), "--quiet",
                            env=no_java(tmp_path), cwd=tmp_path)
    assert_one_line_error(code, err, "--master", "--engine spark")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("args", [("run", "--runs-dir", "runs", "--faults", ""), ("run", "--runs-dir", "runs", "--faults", ","),
                                  ("campaign", "--seeds", "1", "--dir", "d", "--faults", "kill", "--faults", "")])
def test_faults_that_name_no_kind_are_refused_and_start_nothing(tmp_path, args):
    """`--faults "$EMPTY"` was a run without faults; only 'none' asks for that."""
    code, _, err = kipcheck(*args, "--quiet", env=no_java(tmp_path), cwd=tmp_path)
    assert_one_line_error(code, err, "--faults", "no fault kind", "'none'")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("workload", [(), ("--workload", "txn")])
def test_share_consumers_without_the_share_workload_is_refused_and_starts_nothing(tmp_path, workload):
    """--share-consumers was silently unused by the other workloads (--share-group is refused likewise);
    the default's own value, given, is refused too."""
    code, _, err = kipcheck("run", "--share-consumers", "5", *workload, "--runs-dir", str(tmp_path / "runs"),
                            "--quiet", env=no_java(tmp_path), cwd=tmp_path)
    assert_one_line_error(code, err, "--share-consumers", "--workload share")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("args, words", [
    (("--bugs", ","), ("--bugs", "no seeded bug")),
    (("--bugs", ""), ("--bugs", "no seeded bug")),
    (("--markdown", "missing/matrix.md"), ("--markdown", "existing directory")),
    (("--markdown", "."), ("--markdown", "existing directory"))])
def test_a_selftest_refuses_bugs_and_markdown_it_cannot_use_before_any_cluster(tmp_path, args, words):
    """`--bugs ,` ran every bug's window; a --markdown in a missing directory failed after the whole matrix."""
    code, _, err = kipcheck("selftest", *args, "--runs-dir", str(tmp_path / "runs"), "--quiet",
                            env=no_java(tmp_path), cwd=tmp_path)
    assert_one_line_error(code, err, *words)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("args", [("run", "--runs-dir", "runs"), ("campaign", "--seeds", "1", "--dir", "d"),
                                  ("qualify", "--kafka-version", "4.3.1", "--dir", "d")])
@pytest.mark.parametrize("value", ["abc", "-1"])
def test_a_bad_local_engine_memory_bound_is_refused_before_anything_starts(tmp_path, args, value):
    """KIPCHECK_LOCAL_MAX_BYTES was read by int() when the checker was first imported: after the cluster."""
    code, _, err = kipcheck(*args, "--quiet", env={**no_java(tmp_path), "KIPCHECK_LOCAL_MAX_BYTES": value},
                            cwd=tmp_path)
    assert_one_line_error(code, err, "KIPCHECK_LOCAL_MAX_BYTES", repr(value))
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", ["run", "selftest"])
@pytest.mark.parametrize("under", ["", "/x/y"])
def test_a_runs_dir_that_is_a_file_is_refused_before_anything_starts(tmp_path, command, under):
    """The run directory was made after Kafka was resolved and the backend reached, and a file in its
    place failed there as an internal error."""
    (tmp_path / "afile").write_text("")
    code, _, err = kipcheck(command, "--runs-dir", f"afile{under}", "--quiet", env=no_java(tmp_path), cwd=tmp_path)
    assert_one_line_error(code, err, "--runs-dir", "not a directory")
    assert [p.name for p in tmp_path.iterdir()] == ["afile"]


@pytest.mark.parametrize("command", [("run", "--runs-dir", "runs"), ("cluster", "up", "--dir", "c"),
                                     ("selftest", "--runs-dir", "runs")])
def test_kafka_home_and_kafka_version_together_are_refused_before_anything_starts(tmp_path, command):
    """The distribution's own release ran, and --kafka-version was silently unused."""
    code, _, err = kipcheck(*command, "--kafka-home", str(tmp_path), "--kafka-version", "4.3.1",
                            env=no_java(tmp_path), cwd=tmp_path)
    assert_one_line_error(code, err, "--kafka-home", "--kafka-version 4.3.1")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", [("run", "--runs-dir", "runs"), ("campaign", "--seeds", "1", "--dir", "d")])
@pytest.mark.parametrize("option, value, backend", [("--hosts", "cluster.json", "ssh"),
                                                    ("--bootstrap", "127.0.0.1:9092", "external")])
def test_an_option_of_another_backend_is_refused_before_anything_starts(tmp_path, command, option, value, backend):
    """`--hosts cluster.json` without `--backend ssh` was silently unused: a local cluster started instead."""
    code, _, err = kipcheck(*command, option, value, "--quiet", env=no_java(tmp_path), cwd=tmp_path)
    assert_one_line_error(code, err, option, f"--backend {backend}", "native")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("args", [("run", "--runs-dir", "runs"), ("campaign", "--seeds", "1", "--dir", "d")])
@pytest.mark.parametrize("value", ["lots", "0", "2gb"])
def test_a_bad_spark_driver_memory_is_refused_before_anything_starts(tmp_path, args, value):
    """KIPCHECK_SPARK_MEMORY reached Spark only at the check, after the cluster."""
    code, _, err = kipcheck(*args, "--engine", "spark", "--quiet",
                            env={**no_java(tmp_path), "KIPCHECK_SPARK_MEMORY": value}, cwd=tmp_path)
    assert_one_line_error(code, err, "KIPCHECK_SPARK_MEMORY", repr(value))
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", [("run", "--runs-dir", "runs"), ("cluster", "up", "--dir", "c")])
@pytest.mark.parametrize("value", ["", "Xmx1g", "-"])
def test_a_broker_jvm_arg_that_is_no_jvm_option_is_refused_before_anything_starts(tmp_path, command, value):
    """Before the main class, '' or 'Xmx1g' would be taken for the class: every broker failed to start."""
    code, _, err = kipcheck(*command, f"--broker-jvm-arg={value}", env=no_java(tmp_path), cwd=tmp_path)
    assert_argparse_error(code, err, "--broker-jvm-arg", repr(value))
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("command", [("campaign", "--seeds", "1", "--quiet"), ("qualify", "--kafka-version", "4.3.1", "--quiet"),
                                     ("cluster", "up")])
def test_a_dir_that_is_a_file_is_refused_before_anything_starts(tmp_path, command):
    """campaign --dir FILE failed as \"internal error: FileExistsError\" after resolving its releases."""
    (tmp_path / "afile").write_text("")
    code, _, err = kipcheck(*command, "--dir", "afile", env=no_java(tmp_path), cwd=tmp_path)
    assert_one_line_error(code, err, "--dir", "not a directory")
    assert [p.name for p in tmp_path.iterdir()] == ["afile"]


@pytest.mark.parametrize("args, option", [
    (("up", "--hosts", "cluster.json"), "--hosts"), (("up", "--id", "abc"), "--id"),
    (("down", "--dir", "runs/a"), "--dir"), (("down", "--kafka-version", "4.3.1"), "--kafka-version"),
    (("status", "--tiered"), "--tiered"), (("status", "--hosts", "cluster.json"), "--hosts")])
def test_a_cluster_option_given_to_an_action_that_ignores_it_is_refused(tmp_path, args, option):
    """`cluster up --hosts FILE` started a local cluster; `cluster down --dir D` stopped every cluster. The state
    directory is the test's own: a regression finds no cluster of anyone else's to stop."""
    code, _, err = kipcheck("cluster", *args, env={**no_java(tmp_path), "KIPCHECK_STATE_DIR": str(tmp_path / "state")},
                            cwd=tmp_path)
    assert_one_line_error(code, err, option, f"not {args[0]}")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("args", [("run", "--seed", "x"), ("run", "--controllers", "9"), ("run", "--elr", "maybe"),
                                  ("campaign", "--backend", "nope"), ("qualify",), ("cluster", "sideways"),
                                  ("selftest", "--window", "0"), ("run", "--no-such-option"), ()])
def test_an_argparse_refusal_is_one_line_without_the_usage(tmp_path, args):
    """argparse printed the whole usage (19 lines for `run`) above its error line."""
    code, _, err = kipcheck(*args, env=no_java(tmp_path), cwd=tmp_path)
    assert_one_line_error(code, err, "error:", "--help")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("saved, args, words", [
    ('{"plan": [', (), ("cannot resume", "campaign.json")),
    ('{"plan": []}', (), ("cannot resume", "settings")),
    ('{"plan": [], "settings": {"duration": 5}}', ("--faults", "kill"), ("resumes", "drop --faults")),
    ('{"plan": [], "settings": {"duration": 5}}', ("--tiered", "--kafka-versions", "4.3.1"),
     ("drop --kafka-versions, --tiered",))])
def test_a_resumed_campaign_refuses_options_it_would_not_use_and_a_damaged_plan(tmp_path, saved, args, words):
    """A resume took the saved plan and silently dropped a new --faults; a damaged campaign.json was an
    internal error."""
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "campaign.json").write_text(saved)
    code, _, err = kipcheck("campaign", "--dir", "d", *args, "--quiet", env=no_java(tmp_path), cwd=tmp_path)
    assert_one_line_error(code, err, *words)
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["campaign.json"]
    assert (tmp_path / "d" / "campaign.json").read_text() == saved


@pytest.mark.parametrize("args", [("run", "--runs-dir", "runs"), ("campaign", "--seeds", "1", "--dir", "d")])
def test_a_toxiproxy_server_that_is_not_an_executable_is_refused_before_anything_starts(tmp_path, args):
    """KIPCHECK_TOXIPROXY_SERVER was used as given when the cluster's proxies started, mid-start."""
    code, _, err = kipcheck(*args, "--quiet", env={**no_java(tmp_path), "KIPCHECK_TOXIPROXY_SERVER": "/nonexistent/tp"},
                            cwd=tmp_path)
    assert_one_line_error(code, err, "KIPCHECK_TOXIPROXY_SERVER=/nonexistent/tp", "executable")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("option", [("--broker-jvm-arg=-XX:+UseZGC",), ("--broker-jit", "c1"), ("--controllers", "1")])
def test_an_option_of_the_brokers_jvms_with_a_backend_that_starts_no_kafka_is_refused(tmp_path, option):
    """`--backend external` reaches a running cluster: an option for the JVMs or the quorum of nodes
    kipcheck starts was silently unused there."""
    code, _, err = kipcheck("run", "--backend", "external", "--bootstrap", "127.0.0.1:1", *option,
                            "--runs-dir", str(tmp_path / "runs"), "--quiet", env=no_java(tmp_path), cwd=tmp_path)
    assert_one_line_error(code, err, "--backend external", option[0].split("=")[0])
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("option", [("--bugs", "lost-write"), ("--window", "5"), ("--kafka-version", "4.3.1"),
                                    ("--runs-dir", "runs")])
def test_selftest_from_a_matrix_refuses_the_options_of_a_measurement(tmp_path, option):
    """`--from` prints a measured matrix again: --bugs and --window were silently unused beside it."""
    (tmp_path / "matrix.json").write_text("{}")
    code, _, err = kipcheck("selftest", "--from", "matrix.json", *option, env=no_java(tmp_path), cwd=tmp_path)
    assert_one_line_error(code, err, "--from", option[0])
    assert [p.name for p in tmp_path.iterdir()] == ["matrix.json"]


@pytest.mark.parametrize("value", ["0", "kip392.consumer_fetch_outcomes=0"])
def test_a_coverage_requirement_of_zero_is_refused_before_anything_starts(tmp_path, value):
    """At least 0 observations asks for nothing: a requirement that could never fail."""
    code, _, err = kipcheck("run", "--require-coverage", value, "--runs-dir", str(tmp_path / "runs"), "--quiet",
                            env=no_java(tmp_path), cwd=tmp_path)
    assert_one_line_error(code, err, "--require-coverage", ">= 1")
    assert not any(tmp_path.iterdir())
