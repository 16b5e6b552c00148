#!/usr/bin/env bash
# Builds the Java SDK (sdks/java) with javac --release 8 against Debian's jars (servlet API,
# Spring Framework 4.3), runs its tests, and builds the conformance sample. Output in
# $JOBFLOW_JAVA_OUT (default ${CARGO_TARGET_DIR:-target}/java); `scripts/sdk-java.sh classpath`
# prints the sample's runtime class path.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

out="${JOBFLOW_JAVA_OUT:-${CARGO_TARGET_DIR:-$PWD/target}/java}"
jars=/usr/share/java
spring="$jars/spring3-core.jar:$jars/spring3-beans.jar:$jars/spring3-context.jar:$jars/spring3-aop.jar:$jars/spring3-expression.jar:$jars/commons-logging.jar"
compile_cp="$jars/servlet-api.jar:$spring"
if [ "${1:-}" = classpath ]; then
    echo "$out/main:$out/conformance:$spring"
    exit 0
fi

ensure_java
for package in libservlet-api-java:servlet-api.jar libspring-context-java:spring3-context.jar \
    libspring-beans-java:spring3-beans.jar libspring-core-java:spring3-core.jar \
    libspring-aop-java:spring3-aop.jar libspring-expression-java:spring3-expression.jar \
    libcommons-logging-java:commons-logging.jar; do
    apt_install_for "$jars/${package#*:}" "${package%%:*}" "the Java SDK"
done

rm -rf "$out" && mkdir -p "$out/main" "$out/test" "$out/conformance"
(cd sdks/java && javac --release 8 -Xlint:all,-options,-path -Werror -encoding UTF-8 -cp "$compile_cp" -d "$out/main" \
    $(find src/main/java -name '*.java'))
(cd sdks/java && javac --release 8 -Xlint:all,-options,-path -Werror -encoding UTF-8 -cp "$out/main:$compile_cp" -d "$out/test" \
    $(find src/test/java -name '*.java'))
(cd sdks/java && javac --release 8 -Xlint:all,-options,-path -Werror -encoding UTF-8 -cp "$out/main:$compile_cp" -d "$out/conformance" \
    $(find src/conformance/java -name '*.java'))
if [ "${1:-}" != build ]; then
    log "Java SDK: tests (sdks/java/src/test)"
    java -cp "$out/main:$out/test:$compile_cp" jobflow.executor.JobExecutorTest
    log "Java SDK: Nacos registration against rnacos"
    ensure_rnacos
    java -cp "$out/main:$out/test:$compile_cp" jobflow.executor.NacosRegistrationTest
fi
