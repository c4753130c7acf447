"""The checker rules: one module per KIP or family; each rule is pure (history in, anomalies out) and asks reference_model which outcomes a proven state allows."""
