"""KIP-932 share sessions: `share-session-violation`.

Porcupine style, as the KIP-227 rule (session_rules.py): one session per (broker, group, member)
of the prober's `share_fetch` and `share_acknowledge` records (docs/history.md, "The prober's
share sessions"), stepped in history order through `reference_model.kip932`: before each answer
the model says which session answers it allows (`share_session_answer`) from the epoch the
member's session on that broker expects; after it, the next state follows the observed answer
(`share_session_after`), so one wrong answer is reported once, not again at every later request.

A request whose answer was lost (`info`) leaves the session unknown until the member opens a new
one; a request never sent (`fail`) changes nothing. Answers outside the session rules (a top-level
INVALID_REQUEST, GROUP_AUTHORIZATION_FAILED, ...) are not judged, and leave the session unknown.
The share workload's `share_poll` / `share_ack` are not read here (share_rules.py judges them).

SHARE_SESSION_NOT_FOUND for a live session is allowed only where the model's mechanisms can have
acted (`kip932.share_session_may_be_gone`); the rule passes it the facts: the connection the
session's open and the request went on (the invokes' `connection`), and whether a fault with a
`kip932.SESSION_DROPPING_EFFECTS` effect on that broker overlapped the time since the open. So
the rule reads `fault` records too, and all the prober's share requests form one group (a few
per round).
"""
from __future__ import annotations

from typing import Iterable, Sequence

from kipcheck import effects
from kipcheck.reference_model import kip932

from kipcheck.checks.rules.base import RULE, Anomaly, BaseRule
from kipcheck.checks.rules.kip1166_rules import fault_windows
from kipcheck.checks.rules.observe import as_int, broker_ids

NAME = "share-session-violation"
REQUESTS = (kip932.SHARE_FETCH, kip932.SHARE_ACKNOWLEDGE)
GROUP = "share-session"


class ShareSessionRule(BaseRule):
    anomalies = (NAME,)
    fs = frozenset((*REQUESTS, "fault"))

    def group_keys(self, record: dict) -> Iterable[str]:
        if record.get("f") in REQUESTS or record.get("f") == "fault":
            yield GROUP

    def check(self, records: Sequence[dict], profile: str) -> list[Anomaly]:
        faults = _dropping_faults(records)
        sessions: dict[tuple, _Session] = {}
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
            v = (inv or r).get("value") or {}
            s = sessions.setdefault((v.get("broker"), v.get("group"), v.get("member_id")), _Session())
            if kind == "info":
                s.expected = kip932.UNKNOWN_SESSION
            if kind != "ok" or inv is None:
                continue
            epoch = as_int(v.get("session_epoch"))
            answer = (r.get("value") or {}).get("top_error")
            if epoch is None or not isinstance(answer, str):
                s.expected = kip932.UNKNOWN_SESSION  # a record the rule cannot read: judge nothing it leads to
                continue
            gone = kip932.share_session_may_be_gone(
                s.opened_on, v.get("connection"),
                s.opened_at is not None and faults.touch(v.get("broker"), s.opened_at, r.get("time", 0)))
            allowed = kip932.share_session_answer(r["f"], epoch, s.expected, gone)
            if allowed is not None and answer in kip932.SHARE_SESSION_ANSWERS and answer not in allowed:
                out.append(_violation(inv, r, epoch, s.expected, answer, allowed))
            s.expected = kip932.share_session_after(r["f"], epoch, s.expected, answer)
            if r["f"] == kip932.SHARE_FETCH and epoch == kip932.SHARE_INITIAL_EPOCH and answer == kip932.NONE:
                s.opened_on, s.opened_at = v.get("connection"), inv.get("time", 0)
        return out


class _Session:
    """What the rule knows of one member's session on one broker: the epoch it expects (None: no
    session, the member has opened none there yet), and the connection and time of its open."""

    def __init__(self):
        self.expected: int | None | str = None
        self.opened_on, self.opened_at = None, None


class _Faults:
    """The windows of faults that can drop a share session unseen (`kip932.SESSION_DROPPING_EFFECTS`)."""

    def __init__(self, windows):
        self.windows = windows

    def touch(self, broker, begin: int, end: int) -> bool:
        """Whether one of them, on `broker` or on targets the history does not name, overlapped [begin, end]."""
        return any(s <= end and begin <= e and (t is None or broker in broker_ids(t)) for s, e, t in self.windows)


def _dropping_faults(records: Sequence[dict]) -> _Faults:
    return _Faults(fault_windows([r for r in records if r.get("f") == "fault"
                                  and not effects.of(r.get("value")).isdisjoint(kip932.SESSION_DROPPING_EFFECTS)]))


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
