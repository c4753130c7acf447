"""Checker recall, measured: plant one violation (or one benign change) in a real history
and see whether the checker names it at the planted records (docs/checker.md, "Recall").

`operators` holds every mutation, each named after the KIP or contract sentence it breaks
(or, benign, the Kafka behaviour that makes it legal); `recall` applies them at seeded
positions and counts catches and false alarms. Pure: histories in, figures out.
"""
