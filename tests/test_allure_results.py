"""`kipcheck run`'s Allure results, written through allure-python-commons: one Allure test per
anomaly name, failed with one step per example when the run found it, passed when it did not."""
import json

from kipcheck.reports.allure import write_allure_results


def test_one_result_per_anomaly_name_with_steps_and_parameters(tmp_path):
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "index.html").write_text("<!doctype html><title>report</title>")
    example = {"indices": [3, 5], "message": "t/0 offset 1 holds 2 values"}
    verdict = {"valid": False, "profile": "kafka-4.3",
               "anomalies": {"inconsistent-offset": [example], "lost-write": []},
               "known": {"inconsistent-offset": [], "lost-write": [{"indices": [9], "message": "known"}]}}
    out = write_allure_results(tmp_path, verdict, {"kafka_version": "4.3.1", "seed": 11})
    results = {r["name"]: r for r in (json.loads(p.read_text()) for p in out.glob("*-result.json"))}
    assert set(results) == {"inconsistent-offset", "lost-write"}
    bad, good = results["inconsistent-offset"], results["lost-write"]
    assert bad["status"] == "failed" and good["status"] == "passed"
    assert [s["name"] for s in bad["steps"]] == ["inconsistent-offset: t/0 offset 1 holds 2 values"]
    assert bad["steps"][0]["status"] == "failed" and not good.get("steps")
    proof = json.loads((out / bad["steps"][0]["attachments"][0]["source"]).read_text())
    assert proof == example
    assert {p["name"]: p["value"] for p in bad["parameters"]} == {
        "kafka_version": "4.3.1", "seed": "11", "profile": "kafka-4.3"}
    assert {"name": "feature", "value": "durability"} in bad["labels"]
    assert good["statusDetails"]["message"] == "0 anomalies, 1 known deviations"
    assert {a["name"] for a in bad["attachments"]} == {"examples", "report"}  # the report where it failed
    assert {a["name"] for a in good["attachments"]} == {"examples"}
    for r in results.values():
        assert all((out / a["source"]).exists() for a in r["attachments"])


def test_an_unknown_verdict_skips_the_names_it_could_not_decide(tmp_path):
    out = write_allure_results(tmp_path, {"valid": None, "anomalies": {"poll-skip": []}}, {})
    (result,) = [json.loads(p.read_text()) for p in out.glob("*-result.json")]
    assert result["status"] == "skipped"
