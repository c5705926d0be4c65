"""Jars of Spark's own modules that pyspark does not ship, resolved with Maven and handed to
Spark as local paths (``spark.jars``): ``spark-sql-kafka-0-10`` (Spark's Kafka sink,
``df.write.format("kafka")``, the benchmarks' ``spark-jvm-kafka``) and ``spark-avro``
(``to_avro``/``from_avro``: the tests read back what the sink writes with it).

``resolve_spark_module(module)`` asks Maven for ``org.apache.spark:<module>_<scala>`` at the
installed pyspark's version (POM: ``maven/spark-module.pom.xml``), through
``sparkkafka_sink.testing.apache_kafka.resolve_maven_artifacts`` (a cache outside the
repository, resolved once).  If Maven does not serve that exact version, the nearest release it
serves is used instead (the highest one below, else the lowest one above, same major version)
and the answer says so (``exact: False``); the choice is cached beside the jars.

Of the resolved jars only those pyspark does not ship already are kept (matched by artifact
name, whatever the version): Spark's own jars, Scala's library, Hadoop's client, Avro, slf4j,
lz4, snappy, zstd... stay pyspark's; kafka-clients, spark-sql-kafka, spark-avro,
spark-token-provider-kafka, commons-pool2 and whatever else is missing go to ``spark.jars``.

CLI: ``python -m sparkkafka_sink.testing.spark_jars [MODULE]`` resolves and prints the answer.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

POM_TEMPLATE = Path(__file__).resolve().parent / "maven" / "spark-module.pom.xml"
GROUP = "org.apache.spark"
SPARK_KAFKA = "spark-sql-kafka-0-10"
SPARK_AVRO = "spark-avro"

_ARTIFACT_RE = re.compile(r"^(?P<artifact>.+?)-(?P<version>\d+(?:\.\d+)+.*)\.jar$")
_RELEASE_RE = re.compile(r"^\d+\.\d+\.\d+$")


class SparkModuleUnavailable(RuntimeError):
    """The jars could not be resolved (no java/mvn, no network, no served version)."""


def artifact_of(jar_name: str) -> str:
    """``kafka-clients-3.9.2.jar`` -> ``kafka-clients``; ``spark-sql-kafka-0-10_2.13-4.2.0.jar``
    -> ``spark-sql-kafka-0-10_2.13`` (the version starts at the first ``-<digits>.<digits>``)."""
    m = _ARTIFACT_RE.match(jar_name)
    return m.group("artifact") if m else jar_name[:-4] if jar_name.endswith(".jar") else jar_name


def pyspark_jars_dir() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def scala_binary(jars_dir: Path | None = None) -> str:
    """Scala binary version pyspark was built for (``2.13``), from its ``spark-core_*`` jar."""
    for p in sorted((jars_dir or pyspark_jars_dir()).glob("spark-core_*.jar")):
        m = re.match(r"spark-core_(\d+\.\d+)-", p.name)
        if m:
            return m.group(1)
    return "2.13"


def _artifact_id(module: str, scala: str) -> str:
    return f"{module}_{scala}"


def _pom(module: str, version: str, scala: str) -> str:
    return (POM_TEMPLATE.read_text().replace("@MODULE@", module).replace("@SPARK_VERSION@", version)
            .replace("@SCALA_BINARY@", scala))


def _vtuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


def _mvn(args: list[str], timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never", *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout, cwd=str(POM_TEMPLATE.parent))


def served_versions(module: str, scala: str) -> list[str]:
    """Release versions (no previews) Maven's repositories list for ``module``.

    Maven has no command that prints an artifact's versions, but resolving the ``RELEASE``
    meta-version makes it fetch the artifact's ``maven-metadata.xml`` into the local repository,
    where it is read (every repository's copy)."""
    artifact = _artifact_id(module, scala)
    _mvn(["dependency:get", f"-Dartifact={GROUP}:{artifact}:RELEASE:pom", "-Dtransitive=false"])
    repo = Path.home() / ".m2" / "repository"
    try:
        out = _mvn(["help:evaluate", "-Dexpression=settings.localRepository", "-DforceStdout"]).stdout
        line = re.sub(r"\x1b\[[0-9;]*m", "", out).strip().splitlines()
        if line and Path(line[-1].strip()).is_dir():
            repo = Path(line[-1].strip())
    except (OSError, subprocess.SubprocessError):
        pass
    versions: set[str] = set()
    for meta in (repo / GROUP.replace(".", "/") / artifact).glob("maven-metadata*.xml"):
        try:
            versions.update(re.findall(r"<version>\s*([^<\s]+)\s*</version>", meta.read_text()))
        except OSError:
            continue
    return sorted((v for v in versions if _RELEASE_RE.match(v)), key=_vtuple)


def nearest(requested: str, served: list[str]) -> list[str]:
    """Served releases of ``requested``'s major version, nearest first: below (highest first),
    then above (lowest first)."""
    if not _RELEASE_RE.match(requested):
        release = re.match(r"\d+\.\d+\.\d+", requested)
        requested = release.group(0) if release else requested
    try:
        want = _vtuple(requested)
    except ValueError:
        return list(reversed(served))
    same = [v for v in served if _vtuple(v)[0] == want[0] and v != requested]
    below = sorted((v for v in same if _vtuple(v) < want), key=_vtuple, reverse=True)
    above = sorted((v for v in same if _vtuple(v) > want), key=_vtuple)
    return below + above


def _not_served(err: Exception) -> bool:
    text = str(err)
    return "Could not find artifact" in text or "was not found in" in text


def _resolve_version(module: str, version: str, scala: str) -> Path:
    from sparkkafka_sink.testing.apache_kafka import cache_dir, resolve_maven_artifacts

    name = f"{module}_{scala}-{version}"
    try:
        return resolve_maven_artifacts(name, _pom(module, version, scala))
    except Exception:
        base = cache_dir() / name
        if not (base / "resolved").exists():  # a failed attempt: leave no half-made cache entry
            shutil.rmtree(base, ignore_errors=True)
        raise


def resolve_spark_kafka(spark_version: str | None = None, max_fallbacks: int = 3) -> dict:
    """Spark's Kafka sink (``format("kafka")``): see :func:`resolve_spark_module`."""
    return resolve_spark_module(SPARK_KAFKA, spark_version, max_fallbacks)


def resolve_spark_avro(spark_version: str | None = None, max_fallbacks: int = 3) -> dict:
    """Spark's Avro functions (``to_avro``, ``from_avro``): see :func:`resolve_spark_module`."""
    return resolve_spark_module(SPARK_AVRO, spark_version, max_fallbacks)


def resolve_spark_module(module: str, spark_version: str | None = None, max_fallbacks: int = 3) -> dict:
    """Resolve a Spark module's jars; returns ``{"requested", "resolved", "exact", "artifact",
    "kafka_clients", "jars" (local paths for spark.jars), "dropped" (shipped by pyspark),
    "lib"}`` or raises :class:`SparkModuleUnavailable`."""
    from sparkkafka_sink.testing.apache_kafka import cache_dir, java_and_maven_available

    if spark_version is None:
        import pyspark

        spark_version = pyspark.__version__
    if not java_and_maven_available():
        raise SparkModuleUnavailable(f"java and mvn are needed to resolve {module}'s jars")
    jars_dir = pyspark_jars_dir()
    scala = scala_binary(jars_dir)
    artifact = _artifact_id(module, scala)
    choice_file = cache_dir() / f"{module}_{scala}-for-pyspark-{spark_version}.json"
    resolved, lib, tried = None, None, []
    try:
        cached = json.loads(choice_file.read_text())
        if Path(cached["lib"]).is_dir():
            resolved, lib = cached["resolved"], Path(cached["lib"])
    except (OSError, ValueError, KeyError):
        pass
    if lib is None:
        try:
            lib = _resolve_version(module, spark_version, scala)
            resolved = spark_version
        except Exception as e:
            tried.append(spark_version)
            if not _not_served(e):
                raise SparkModuleUnavailable(f"resolving {artifact}:{spark_version} failed: {e}") from e
            for cand in nearest(spark_version, served_versions(module, scala))[:max_fallbacks]:
                try:
                    lib = _resolve_version(module, cand, scala)
                    resolved = cand
                    break
                except Exception as e2:
                    tried.append(cand)
                    if not _not_served(e2):
                        raise SparkModuleUnavailable(f"resolving {artifact}:{cand} failed: {e2}") from e2
            if lib is None:
                raise SparkModuleUnavailable(f"Maven serves no {artifact} near {spark_version} "
                                            f"(tried {', '.join(tried)})") from None
        choice_file.parent.mkdir(parents=True, exist_ok=True)
        choice_file.write_text(json.dumps({"requested": spark_version, "resolved": resolved, "lib": str(lib)}))
    shipped = {artifact_of(p.name) for p in jars_dir.glob("*.jar")}
    keep: list[Path] = []
    dropped: list[Path] = []
    for p in sorted(lib.glob("*.jar")):
        (dropped if artifact_of(p.name) in shipped else keep).append(p)
    kafka_clients = next((m.group("version") for p in keep
                          if (m := _ARTIFACT_RE.match(p.name)) and m.group("artifact") == "kafka-clients"), None)
    return {"artifact": f"{GROUP}:{artifact}", "requested": spark_version, "resolved": resolved,
            "exact": resolved == spark_version, "kafka_clients": kafka_clients,
            "jars": [str(p) for p in keep], "dropped": [p.name for p in dropped], "lib": str(lib)}


def describe(info: dict) -> str:
    """One line for logs and results.md."""
    jar = info["artifact"].split(":")[1]
    s = f"{jar} {info['resolved']}"
    if not info.get("exact"):
        s += f" (pyspark is {info['requested']}: Maven does not serve {info['requested']}, nearest served used)"
    if info.get("kafka_clients"):
        s += f", kafka-clients {info['kafka_clients']}"
    return s


if __name__ == "__main__":
    import sys

    print(json.dumps(resolve_spark_module(sys.argv[1] if len(sys.argv) > 1 else SPARK_KAFKA), indent=2))
