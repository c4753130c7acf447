"""KIP-932 share sessions: `share-session-violation`.

Porcupine style, as the KIP-227 rule (session_rules.py): one group per (broker, group, member)
of the prober's `share_fetch` and `share_acknowledge` records (docs/history.md, "The prober's
share sessions"), stepped in history order through `reference_model.kip932`: before each answer
the model says which session answers it allows (`share_session_answer`) from the epoch the
member's session on that broker expects; after it, the next state follows the observed answer
(`share_session_after`), so one wrong answer is reported once, not again at every later request.

A request whose answer was lost (`info`) leaves the session unknown until the member opens a new
one; a request never sent (`fail`) changes nothing. Answers outside the session rules (a top-level
INVALID_REQUEST, GROUP_AUTHORIZATION_FAILED, ...) are not judged, and leave the session unknown.
The share workload's `share_poll` / `share_ack` are not read here (share_rules.py judges them).
"""
from __future__ import annotations

from typing import Iterable, Sequence

from kipcheck.reference_model import kip932

from kipcheck.checks.rules.base import RULE, Anomaly, BaseRule
from kipcheck.checks.rules.observe import as_int

NAME = "share-session-violation"
REQUESTS = (kip932.SHARE_FETCH, kip932.SHARE_ACKNOWLEDGE)


class ShareSessionRule(BaseRule):
    anomalies = (NAME,)

    def group_keys(self, record: dict) -> Iterable[str]:
        if record.get("f") in REQUESTS:
            v = record.get("value") or {}
            yield f"share-session:{v.get('broker')}:{v.get('group')}:{v.get('member_id')}"

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        expected: int | None | str = None  # the member has no session on this broker until it opens one
        pending: dict = {}
        out = []
        for r in records:
            if r.get("f") not in REQUESTS:
                continue
            kind, process = r.get("type"), r.get("process")
            if kind == "invoke":
                pending[process] = r
                continue
            inv = pending.pop(process, None)
            if kind == "info":
                expected = kip932.UNKNOWN_SESSION
            if kind != "ok" or inv is None:
                continue
            epoch = as_int((inv.get("value") or {}).get("session_epoch"))
            answer = (r.get("value") or {}).get("top_error")
            if epoch is None or not isinstance(answer, str):
                expected = kip932.UNKNOWN_SESSION  # a record the rule cannot read: judge nothing it leads to
                continue
            allowed = kip932.share_session_answer(r["f"], epoch, expected)
            if allowed is not None and answer in kip932.SHARE_SESSION_ANSWERS and answer not in allowed:
                out.append(_violation(inv, r, epoch, expected, answer, allowed))
            expected = kip932.share_session_after(r["f"], epoch, expected, answer)
        return out


def _violation(inv: dict, done: dict, epoch: int, expected, answer: str, allowed: frozenset) -> Anomaly:
    v = inv.get("value") or {}
    state = ("no session" if expected is None else f"its session expecting epoch {expected}")
    indices = tuple(sorted({i for i in (inv.get("index"), done.get("index")) if isinstance(i, int)}))
    return Anomaly(NAME, indices,
                   f"broker {v.get('broker')} answered {done.get('f')} epoch {epoch} of member {v.get('member_id')} "
                   f"({state}) with {answer}; KIP-932 allows {' or '.join(sorted(allowed))}",
                   details={RULE: "kip932.share_session_answer", "broker": v.get("broker"),
                            "member_id": v.get("member_id"), "session_epoch": epoch, "answer": answer,
                            "allowed": sorted(allowed)})
