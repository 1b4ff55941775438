#!/usr/bin/env python3
"""A lake of sweeps read by Spark as the command reference says: `sweep=` folders become a
text `sweep` column, a column only the newest sweep has is null in the older ones
(mergeSchema), and each sweep's rows and mean rewards equal `rollstat query --lake`.

    python tests/python/check_lake_spark.py ROLLSTAT_BINARY
"""

import csv
import io
import json
import os
import subprocess
import sys
import tempfile

from pyspark.sql import SparkSession, functions as F


def run(binary, *args):
    p = subprocess.run([binary, *map(str, args)], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"rollstat {' '.join(map(str, args))}: exit {p.returncode}\n{p.stderr}")
    return p.stdout


def main():
    binary = os.path.abspath(sys.argv[1])
    work = tempfile.mkdtemp(prefix="rollstat-check-lake-spark-")
    lake = os.path.join(work, "lake")
    for step in (1000, 2000, 3000):
        d = os.path.join(work, str(step))
        run(binary, "generate", "-q", "--tasks", 80, "--repeats", 4, "--agents", 2, "--fan-out", "--task-seed", 4,
            "--seed", step, "--out-dir", d)
        rollouts = os.path.join(d, "rollouts.jsonl")
        if step == 3000:
            with open(rollouts) as f:
                rows = [json.loads(line) for line in f]
            with open(rollouts, "w") as f:
                f.writelines(json.dumps({**o, "judge_score": 0.5}) + "\n" for o in rows)
        run(binary, "export", "-q", rollouts, "--inputs", os.path.join(d, "materialized_inputs.jsonl"), "--lake", lake,
            "--sweep-id", str(step), "--label", f"step={step}")
    want = list(csv.DictReader(io.StringIO(run(binary, "query", "--lake", lake, "--format", "csv",
        'SELECT sweep, agent, "mean/reward" AS m, num_repeats FROM agents ORDER BY sweep, agent'))))
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    failures = []
    try:
        agents = spark.read.option("mergeSchema", "true").parquet(os.path.join(lake, "agents"))
        if str(agents.schema["sweep"].dataType) not in ("StringType", "StringType()"):
            # Numeric-looking ids: Spark guesses an integer unless told.
            agents = agents.withColumn("sweep", F.col("sweep").cast("string"))
        got = [r.asDict() for r in agents.select("sweep", "agent", "`mean/reward`", "num_repeats")
               .orderBy("sweep", "agent").collect()]
        if len(got) != len(want):
            failures.append(f"agents: {len(got)} rows, rollstat query {len(want)}")
        for g, w in zip(got, want):
            if (g["sweep"], g["agent"], repr(g["mean/reward"]), str(g["num_repeats"])) != \
                    (w["sweep"], w["agent"], repr(float(w["m"])), w["num_repeats"]):
                failures.append(f"agents row {g} != {w}")
        rollouts = spark.read.option("mergeSchema", "true").parquet(os.path.join(lake, "rollouts"))
        scored = {str(r["sweep"]): r["n"] for r in
                  rollouts.groupBy("sweep").agg(F.count("judge_score").alias("n")).collect()}
        if scored != {"1000": 0, "2000": 0, "3000": 640}:
            failures.append(f"judge_score per sweep: {scored} (want null before sweep 3000)")
        labels = spark.read.parquet(os.path.join(lake, "sweeps")).select("sweep", "step").collect()
        if sorted((str(r["sweep"]), r["step"]) for r in labels) != [("1000", 1000), ("2000", 2000), ("3000", 3000)]:
            failures.append(f"labels: {labels}")
    finally:
        spark.stop()
    if failures:
        sys.exit("lake read by Spark:\n  " + "\n  ".join(failures))
    print(f"lake read by Spark: {len(got)} agent rows across 3 sweeps equal rollstat query --lake; "
          "a new column is null in older sweeps")


if __name__ == "__main__":
    main()
