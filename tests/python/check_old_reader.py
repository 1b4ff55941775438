"""Opens every exported table with an old pyarrow (12, before Arrow's string_view type
existed), as older BI tools and pipelines do, and checks the rows and the string columns.

Usage: check_old_reader.py TABLES_DIR
"""
import sys

import pyarrow as pa
import pyarrow.parquet as pq

tables = sys.argv[1]
for name in ["rollouts", "tasks", "agents", "repeats"]:
    t = pq.read_table(f"{tables}/{name}.parquet")
    agent = t.schema.field("agent").type
    if not (pa.types.is_string(agent) or pa.types.is_large_string(agent)):
        sys.exit(f"{name}.agent is {agent}, expected a plain UTF-8 string")
    if t.num_rows == 0:
        sys.exit(f"{name} has no rows")
    print(f"pyarrow {pa.__version__}: {name}.parquet {t.num_rows} rows, agent {agent}")
