"""The model-backed rules the engines run (import `MODEL_RULES`)."""
from checks.rules.fetch_rules import ConsumerFetchRule, HighWatermarkRule
from checks.rules.kip1023_rules import TieredOffsetRule
from checks.rules.kip1166_rules import PropagationRule
from checks.rules.replica_rules import PreferredReplicaRule
from checks.rules.session_rules import FetchSessionRule

MODEL_RULES = [
    ConsumerFetchRule(),
    HighWatermarkRule(),
    PreferredReplicaRule(),
    FetchSessionRule(),
    TieredOffsetRule(),
    PropagationRule(),
]
