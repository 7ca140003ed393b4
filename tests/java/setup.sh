#!/usr/bin/env bash
# The Java peer: Apache Iceberg's Spark runtime in a PySpark it supports (Iceberg 1.12 runs on
# Spark 4.1; the project's own PySpark is newer), in .venv-java, with its jars fetched by the
# machine's Maven client and cached in .java-peer/jars. Idempotent: a second run does nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON="${PYTHON:-python3}"
VENV="${JAVA_PEER_VENV:-.venv-java}"
JARS="${JAVA_PEER_JARS:-.java-peer/jars}"
PYSPARK_VERSION=4.1.4
ARTIFACTS=(
  org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0
  org.apache.iceberg:iceberg-aws-bundle:1.12.0
  org.xerial:sqlite-jdbc:3.51.1.0
  org.postgresql:postgresql:42.7.14
)

if ! "$VENV/bin/python" -c "import pyspark, pyarrow; assert pyspark.__version__ == '$PYSPARK_VERSION'" 2>/dev/null; then
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q "pyspark==$PYSPARK_VERSION" 'pyarrow>=15' 'pandas>=2'
fi

mkdir -p "$JARS"
for artifact in "${ARTIFACTS[@]}"; do
  IFS=: read -r group name version <<<"$artifact"
  if [ ! -s "$JARS/$name-$version.jar" ]; then
    mvn -q -B dependency:copy -Dartifact="$artifact" -DoutputDirectory="$JARS" -Dmdep.overWriteIfNewer=true
  fi
done
