"""Issue 21 section 1: every bounded deviation of `reference_model.profiles` keeps its bound
when the run grows. Each test puts one fixed answer just outside the bound (and one just
inside) into a history lengthened 1x, 10x and 100x by answers and sends that agree with
it, before and after; the outside one stays flagged under `kip` and every profile carrying
the deviation, the inside one stays known there. The LEO bound of `fetch-above-hwm-empty`
and `offsets-for-leader-epoch-uncapped` (`SendBound`) is in tests/test_deviation_bounds.py.

Not here: `hwm-capped-at-leo` narrows the KIP (nothing to accept), the session deviations
(`empty-session-closed`: only a request that emptied the session, a property of that one
request; `evict-smallest`, `sharded-session-cache`, `follower-bootstrap-absent`: model only),
`incremental-extra-partitions` (not bounded) and `kraft-fetch-parks-without-hwm` (a
statistic over the run's changes: more changes are more evidence, not a wider bound)."""
from hypothesis import HealthCheck, given, settings, strategies as st

from kipcheck.checks.engine_local import check_records
from kipcheck.checks.rules.fetch_rules import ConsumerFetchRule, HighWatermarkRule
from kipcheck.reference_model import profiles
from tests.support.histories import fetch, history, meta, names, run

SCALE = st.sampled_from([1, 10, 100])
PROPERTY = settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def carrying(deviation):
    """The oldest and newest profile carrying the deviation (each bound is one model function,
    the same for all of them; tests/test_deviation_bounds.py holds every profile at 1x)."""
    names_ = [name for name, p in sorted(profiles.PROFILES.items()) if p.allows(deviation)]
    return sorted({names_[0], names_[-1]})


def both(records, profile):
    return run(ConsumerFetchRule(), records, profile) + run(HighWatermarkRule(), records, profile)


def stays_flagged(records, name, deviation, judge=both):
    for p in ["kip", *carrying(deviation)]:
        assert name in names(judge(records, p)), p


def stays_known(records, name, deviation, judge=both):
    assert name in names(judge(records, "kip"))
    for p in carrying(deviation):
        found = judge(records, p)
        assert name not in names(found) and name in names(found, known=True), p


def sends(n, first=0):
    return [(5, "send", {"topic": "t", "partition": 0, "key": f"v{i}", "value": f"v{i}", "idempotent": True},
             {"offset": i}) for i in range(first, first + n)]


# --- follower-hwm-follows-leader: the drop's depth ------------------------------------------
F = profiles.FOLLOWER_HWM_FOLLOWS_LEADER


def follower_run(scale: int, drop: int) -> list[dict]:
    """Leader 1 answers HWMs rising to 10 * scale - 1 in epoch 4 (it carries the last into epoch
    5, which it leads); follower 2 answers 8 in epoch 4, carries 10 * scale into epoch 5, drops to
    `drop` once, then both rise with 10 * scale more answers each, between sends."""
    top = 10 * scale
    leader4 = [fetch(0, hwm=h, current_leader_epoch=4, broker=1) for h in range(top - 10 * scale, top)]
    after = []
    for i in range(10 * scale):
        after += [fetch(0, hwm=top + 1 + i, current_leader_epoch=5, broker=1),
                  fetch(0, hwm=top + 1 + i, current_leader_epoch=5), *sends(1, first=i)]
    return history(meta(4, 3), *leader4, fetch(0, hwm=8, current_leader_epoch=4), meta(5, 1),
                   *[fetch(0, hwm=top, current_leader_epoch=5)] * scale,
                   fetch(0, hwm=drop, current_leader_epoch=5), *after, meta(5, 1))


@PROPERTY
@given(scale=SCALE)
def test_a_followers_drop_below_its_new_leaders_hwm_stays_flagged_at_scale(scale):
    stays_flagged(follower_run(scale, drop=10 * scale - 2), "hwm-regression", F)
    stays_known(follower_run(scale, drop=10 * scale - 1), "hwm-regression", F)


# --- response-hwm-sampled-before-read: a later HWM of the same broker ---------------------
R = profiles.RESPONSE_HWM_SAMPLED_BEFORE_READ


def read_above_run(scale: int, later_hwm: int) -> list[dict]:
    """Records 8-10 read with HWM 10 reported; then the same broker and epoch answers
    `later_hwm`, then 10 * scale more answers and sends, all above it."""
    more = []
    for i in range(10 * scale):
        more += [fetch(11, hwm=12 + i, current_leader_epoch=3), *sends(1, first=i)]
    return history(*sends(10 * scale, first=1000), fetch(8, records=[8, 9, 10], current_leader_epoch=3),
                   fetch(11, hwm=later_hwm, current_leader_epoch=3), *more)


@PROPERTY
@given(scale=SCALE)
def test_a_read_above_a_later_hwm_stays_an_uncommitted_read_at_scale(scale):
    stays_flagged(read_above_run(scale, later_hwm=10), "uncommitted-read", R)
    stays_known(read_above_run(scale, later_hwm=11), "uncommitted-read", R)


# --- out-of-range-without-offsets: the LEO the broker proved before -----------------------
O = profiles.OUT_OF_RANGE_WITHOUT_OFFSETS


def out_of_range_run(scale: int, offset: int) -> list[dict]:
    """HWM answers rising to 10 before; OFFSET_OUT_OF_RANGE without offsets at `offset`;
    then 10 * scale answers showing log start 0 and higher HWMs, and sends."""
    before = [fetch(0, hwm=h, current_leader_epoch=3) for h in range(11 - 10 * scale, 11) if h >= 0]
    oor = fetch(offset, error="OFFSET_OUT_OF_RANGE", hwm=-1, start=-1, current_leader_epoch=3)
    more = []
    for i in range(10 * scale):
        more += [fetch(0, hwm=12 + i, current_leader_epoch=3), *sends(1, first=i)]
    return history(*before, oor, *more)


@PROPERTY
@given(scale=SCALE)
def test_out_of_range_below_the_proven_leo_stays_flagged_at_scale(scale):
    def consumer(records, p):
        return run(ConsumerFetchRule(), records, p)
    stays_flagged(out_of_range_run(scale, 10), "wrong-fetch-error", O, consumer)
    stays_known(out_of_range_run(scale, 11), "wrong-fetch-error", O, consumer)


# --- pending-upload-resolved-by-leader: the log start it may reach ------------------------
P = profiles.PENDING_UPLOAD_RESOLVED_BY_LEADER


def list_offsets(t, ts, offset):
    inv = {"broker": 1, "replica_id": -1, "isolation_level": "read_uncommitted", "topic": "t", "partition": 0,
           "timestamp": ts, "current_leader_epoch": 5, "version": 11}
    return (8, "list_offsets", inv, {"error": "NONE", "offset": offset, "leader_epoch": 5})


def pending_run(scale: int, later_start: int) -> list[dict]:
    """Leader 1 (epoch 5): 10 * scale answers of last tiered 100 and HWMs rising from 200,
    then pending upload 150, last tiered 100 and log start `later_start`, then as many again."""
    def filler(first):
        out = []
        for i in range(10 * scale):
            out += [list_offsets(0, -5, 100), list_offsets(0, -1, first + i), *sends(1, first=first + i)]
        return out
    core = [list_offsets(0, -6, 150), list_offsets(0, -5, 100), list_offsets(0, -2, later_start)]
    return history(*filler(200), *core, *filler(200 + 10 * scale))


@PROPERTY
@given(scale=SCALE)
def test_a_pending_upload_beyond_the_log_start_stays_flagged_at_scale(scale):
    def tiered(records, p):
        v = check_records(records, profile=p)
        from types import SimpleNamespace
        return [SimpleNamespace(name=n, known=k) for k, part in ((False, "anomalies"), (True, "known"))
                for n, ex in v[part].items() if ex]
    stays_flagged(pending_run(scale, 149), "tiered-offset-violation", P, tiered)
    stays_known(pending_run(scale, 150), "tiered-offset-violation", P, tiered)
