"""The model-backed rules the engines run (import `MODEL_RULES`)."""
from checks.rules.fetch_rules import ConsumerFetchRule, FetchSessionRule, HighWatermarkRule, PreferredReplicaRule
from checks.rules.kip1023_rules import TieredOffsetRule
from checks.rules.kip1166_rules import PropagationRule

MODEL_RULES = [
    ConsumerFetchRule(),
    HighWatermarkRule(),
    PreferredReplicaRule(),
    FetchSessionRule(),
    TieredOffsetRule(),
    PropagationRule(),
]
