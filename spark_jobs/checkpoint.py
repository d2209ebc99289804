"""The aggregator's Spark checkpoint belongs to one pipeline: the pipeline cluster (by its id) and its observations
and decisions topics. Spark keeps the offsets read there by partition number only, so a checkpoint of another
pipeline would be read without a word: its offsets taken for this pipeline's topics.

- The default location is derived from the pipeline (``default_location``): aggregators of two pipelines on one
  host never share one, and an aggregator finds its own after a restart.
- A marker (MARKER, JSON) in the checkpoint's folder names the pipeline that wrote it, written at its first start;
  a later start for another pipeline is refused (``claim``) before Spark reads it.
- A checkpoint with Spark's files and no marker was written before the marker existed, by this pipeline's aggregator
  at its configured location (the other pipelines' shared only the old default, which the default no longer is):
  it is taken as this pipeline's and marked. Spark's own files could name its topic but not its cluster, and the
  topics' names are the same on every cluster by default, so they would not tell the case that matters.
- A URL (s3a://, hdfs://...) or a Spark Connect server's location is not on this host's filesystem: not checked.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, fields

MARKER = "quota-sidecar-pipeline.json"
_SPARKS_FILES = ("metadata", "offsets", "commits")  # what a query that has started leaves in its checkpoint


class CheckpointError(ValueError):
    """A checkpoint written for another pipeline, or whose marker cannot be read or written (one line)."""


@dataclass(frozen=True)
class Owner:
    """The pipeline a checkpoint belongs to."""
    cluster_id: str
    observations_topic: str
    decisions_topic: str

    def __str__(self) -> str:
        return f"cluster {self.cluster_id} (topics {self.observations_topic} -> {self.decisions_topic})"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Owner:
        """Raises ValueError for anything but the JSON that `to_json` writes."""
        recorded = json.loads(text)
        names = [field.name for field in fields(cls)]
        if not isinstance(recorded, dict) or not all(isinstance(recorded.get(name), str) for name in names):
            raise ValueError(f"expected an object with the strings {', '.join(names)}")
        return cls(*(recorded[name] for name in names))


def default_location(temp_dir: str, owner: Owner) -> str:
    """<temp_dir>/quota-sidecar-aggregator-<12 hex digits of a hash of the pipeline>: the same for every start of
    this pipeline's aggregator, another for any other pipeline."""
    digest = hashlib.sha256(owner.to_json().encode()).hexdigest()[:12]
    return os.path.join(temp_dir, f"quota-sidecar-aggregator-{digest}")


def local_path(location: str) -> str | None:
    """The folder on this host's filesystem of a location (a path or a file: URL); None for another URL."""
    if location.startswith("file:"):
        return "/" + location[len("file:"):].lstrip("/")
    return None if "://" in location else location


def verdict(owner: Owner, recorded: Owner | None, spark_wrote: bool, named: str) -> str:
    """What a start does with a checkpoint whose marker says `recorded` (None: no marker) and where Spark has written
    (`spark_wrote`): "ours" (its marker names this pipeline), "new" (nothing yet: to be marked), "adopted" (Spark's
    files without a marker: to be marked as this pipeline's). `named`: how the one line names the location. Raises
    CheckpointError when the marker names another pipeline."""
    if recorded is None:
        return "adopted" if spark_wrote else "new"
    if recorded != owner:
        raise CheckpointError(f"{named} was written for {recorded}, not this pipeline's {owner}: give another "
                              "location or delete it")
    return "ours"


def claim(location: str, owner: Owner, named: str) -> str | None:
    """Checks that the checkpoint at a local `location` is this pipeline's, marking it so if it is new or unmarked
    (see `verdict`); the line to log when there is something to say (an unmarked checkpoint adopted), else None.
    Raises CheckpointError (one line) for another pipeline's checkpoint, or a marker that cannot be read or written."""
    marker = os.path.join(location, MARKER)
    try:
        with open(marker, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        recorded = None
    except OSError as error:
        raise CheckpointError(f"{named}: cannot read {marker}: {error.strerror or error}") from error
    else:
        try:
            recorded = Owner.from_json(text)
        except ValueError as error:
            raise CheckpointError(f"{named}: {marker} is not the marker of a pipeline ({error}): delete it, or give "
                                  "another location") from error
    spark_wrote = any(os.path.exists(os.path.join(location, name)) for name in _SPARKS_FILES)
    found = verdict(owner, recorded, spark_wrote, named)
    if found == "ours":
        return None
    try:
        os.makedirs(location, exist_ok=True)
        written = f"{marker}.{os.getpid()}"
        with open(written, "w", encoding="utf-8") as file:
            file.write(owner.to_json() + "\n")
        os.replace(written, marker)  # whole or not at all: a start killed meanwhile leaves no half marker
    except OSError as error:
        raise CheckpointError(f"{named}: cannot write {marker}: {error.strerror or error}") from error
    if found == "adopted":
        return f"{named} has no marker of its pipeline (written before markers): taken as this pipeline's, {owner}"
    return None
