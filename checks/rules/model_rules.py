"""The model-backed rules the engines run (import `MODEL_RULES`)."""
from kipcheck.checks.rules.commit_rules import CommitRule
from kipcheck.checks.rules.election_rules import ElectionRule
from kipcheck.checks.rules.fetch_rules import ConsumerFetchRule, HighWatermarkRule
from kipcheck.checks.rules.group_liveness_rules import GroupLivenessRule
from kipcheck.checks.rules.group_rules import GroupOwnershipRule
from kipcheck.checks.rules.kip1023_rules import TieredOffsetRule
from kipcheck.checks.rules.kip1166_rules import PropagationRule
from kipcheck.checks.rules.reassignment_rules import ReassignmentRule
from kipcheck.checks.rules.replica_rules import PreferredReplicaRule
from kipcheck.checks.rules.session_rules import FetchSessionRule
from kipcheck.checks.rules.share_rules import ShareGroupRule
from kipcheck.checks.rules.share_session_rules import ShareSessionRule
from kipcheck.checks.rules.timestamp_rules import AppendTimeRule

MODEL_RULES = [
    ConsumerFetchRule(),
    HighWatermarkRule(),
    PreferredReplicaRule(),
    FetchSessionRule(),
    TieredOffsetRule(),
    PropagationRule(),
    ElectionRule(),
    ReassignmentRule(),
    AppendTimeRule(),
    GroupOwnershipRule(),
    GroupLivenessRule(),
    CommitRule(),
    ShareGroupRule(),
    ShareSessionRule(),
]
