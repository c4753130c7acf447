"""The record types and file names of a run directory (docs/history.md): one definition,
for the writer, the reader and the reports."""

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"
#: every record's type: an operation's invoke, then one completion (ok, fail, or info: unknown)
TYPES = frozenset({INVOKE, OK, FAIL, INFO})
#: the completions, in the order the report shows them
COMPLETIONS = (OK, FAIL, INFO)

JSONL_NAME = "history.jsonl"
PARQUET_NAME = "history.parquet"
CONFIG_NAME = "config.json"
