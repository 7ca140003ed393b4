"""JVM settings for the suite's short-lived JVMs (Spark drivers, the Java peer)."""

from __future__ import annotations

# Small jobs on a fresh JVM: the C1 compiler alone and the serial collector do the same work
# on about half the CPU time of C2 and G1 (the Java peer: 39-41 vs 78-83 CPU-s for its start
# and 8 rounds of reads and DML), since C2 keeps compiling Spark's and each query's classes.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

# The same for the driver JVM of a PySpark program run as a child process (the docs' snippets,
# examples/): PySpark hands these arguments to spark-submit, so the program itself is unchanged.
QUICK_PYSPARK_ENV = {"PYSPARK_SUBMIT_ARGS": f"--driver-java-options '{QUICK_JVM}' pyspark-shell"}
