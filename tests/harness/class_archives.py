"""Class-data archives (JDK's dynamic CDS): the classes a lab JVM loads, recorded once by `make class-archives`
(record_class_archives.py), so that each later broker, tool or Spark driver maps them instead of loading and
verifying them again: the suite starts some hundreds of JVMs.

A JVM refuses an archive that no longer matches its classpath or its Java, and then loads its classes as
without one; so a stale or missing archive costs time, never a failure.
"""

from __future__ import annotations

from pathlib import Path

CLASS_ARCHIVES = Path(__file__).resolve().parents[2] / "build" / "class-archives"
SPARK = "spark"  # the Spark driver's archive: pyspark's own jars, no classpath file of ours


def class_archive(name: str) -> Path:
    """The archive of the JVMs started from build/<name>.classpath, or of Spark's driver (SPARK)."""
    return CLASS_ARCHIVES / f"{name}.jsa"


def archive_options(name: str) -> list[str]:
    """The JVM options that map `name`'s archive, once recorded (none before); the JVM says nothing when it
    refuses one."""
    archive = class_archive(name)
    if not archive.is_file():
        return []
    return [f"-XX:SharedArchiveFile={archive}", "-Xlog:cds=off", "-Xlog:cds+dynamic=off"]


def jvm_options_for(classpath_file: str | Path, options: list[str] | tuple[str, ...]) -> list[str]:
    """`options` and those mapping the archive of the JVMs on `classpath_file`."""
    return [*options, *archive_options(Path(classpath_file).stem)]
