#!/usr/bin/env bash
# S3A for the project's own PySpark: hadoop-aws of the Hadoop version PySpark ships and the
# AWS SDK v2 modules it uses, fetched by the machine's Maven client into .spark-jars (cached:
# a second run does nothing). hadoop-aws declares the SDK's all-services `bundle` (~690 MB);
# S3A needs only s3, s3-transfer-manager and sts (13 MB with their dependencies, as measured
# for hadoop-aws 3.5.0 / SDK 2.35.4). Jars PySpark already ships (netty, Apache HttpClient,
# commons-codec/-logging, slf4j) are left out: the copies on Spark's own classpath are the
# ones loaded anyway.
# Usage: tests/spark_s3a/setup.sh [dir]; then spark.jars = aioiceberg.spark.s3a.s3a_jars(dir).
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PY:-.venv/bin/python}"
JARS="${1:-${SPARK_S3A_JARS:-.spark-jars}}"
HADOOP_VERSION="${HADOOP_VERSION:-$("$PY" -c 'import pathlib, pyspark
jars = pathlib.Path(pyspark.__file__).parent / "jars"
print(next(jars.glob("hadoop-client-api-*.jar")).stem.removeprefix("hadoop-client-api-"))')}"
STAMP="$JARS/.complete-hadoop-aws-$HADOOP_VERSION"
[ -f "$STAMP" ] && exit 0

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# the SDK version hadoop-aws was built against: the version of the bundle it declares (a
# dependency tree resolves POMs only, never the bundle's jar)
cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.aioiceberg</groupId><artifactId>spark-s3a-sdk</artifactId><version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.hadoop</groupId><artifactId>hadoop-aws</artifactId><version>$HADOOP_VERSION</version></dependency>
  </dependencies>
</project>
POM
mvn -q -B -Dstyle.color=never -f "$work/pom.xml" dependency:tree -Dincludes=software.amazon.awssdk:bundle -DoutputFile="$work/tree.txt"
SDK_VERSION="$(grep -o 'software.amazon.awssdk:bundle:jar:[^:]*' "$work/tree.txt" | cut -d: -f4)"
[ -n "$SDK_VERSION" ] || { echo "hadoop-aws $HADOOP_VERSION declares no AWS SDK bundle" >&2; exit 1; }
cat >"$work/pom.xml" <<POM
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.aioiceberg</groupId><artifactId>spark-s3a-jars</artifactId><version>1</version>
  <dependencies>
    <dependency>
      <groupId>org.apache.hadoop</groupId><artifactId>hadoop-aws</artifactId><version>$HADOOP_VERSION</version>
      <exclusions><exclusion><groupId>software.amazon.awssdk</groupId><artifactId>bundle</artifactId></exclusion></exclusions>
    </dependency>
    <dependency><groupId>software.amazon.awssdk</groupId><artifactId>s3</artifactId><version>$SDK_VERSION</version></dependency>
    <dependency><groupId>software.amazon.awssdk</groupId><artifactId>s3-transfer-manager</artifactId><version>$SDK_VERSION</version></dependency>
    <dependency><groupId>software.amazon.awssdk</groupId><artifactId>sts</artifactId><version>$SDK_VERSION</version></dependency>
  </dependencies>
</project>
POM
mkdir -p "$JARS"
rm -f "$JARS"/*.jar "$JARS"/.complete-*
mvn -q -B -Dstyle.color=never -f "$work/pom.xml" dependency:copy-dependencies -DincludeScope=runtime \
  -DexcludeGroupIds=io.netty,org.apache.httpcomponents,commons-codec,commons-logging,org.slf4j \
  -DoutputDirectory="$(cd "$JARS" && pwd)"
touch "$STAMP"
