"""A JSON file a command is given (`evaluate`'s snapshots, `plan`'s reassignment), read with one line
naming what is wrong."""

from __future__ import annotations

import json
from typing import Any


def load(path: str, what: str, error: type[Exception]) -> Any:
    """The file's JSON; `error` naming `what` ("snapshots file") and the path when it cannot be read or is
    not JSON."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except OSError as failure:
        raise error(f"cannot read {what} {path}: {failure.strerror}") from None
    except json.JSONDecodeError as failure:
        raise error(f"{what} {path} is not JSON: {failure}") from None
