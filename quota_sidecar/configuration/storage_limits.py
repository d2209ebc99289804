"""The storage limit from its keys: the hard limit (bytes or a ratio, and its lead time), the soft zone above it and
where the descent starts, each checked against the others: one of a kind, above the hard limit, and what each
needs besides (a soft zone scales `produce`). A wrong combination is a ConfigError naming the keys.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Mapping

from ..common.errors import ConfigError
from ..common.vocabulary import StorageLimit
from .keys import DESCENT_KEYS, HARD_KEYS, SOFT_KEYS
from .properties import PREFIX


def hard_limit(values: Mapping[str, object], required: bool) -> StorageLimit | None:
    min_bytes, min_ratio = (values[key] for key in HARD_KEYS)
    bytes_key, ratio_key = (PREFIX + key for key in HARD_KEYS)
    if min_bytes is not None and min_ratio is not None:
        raise ConfigError(f"{bytes_key}={min_bytes} and {ratio_key}={min_ratio}: set exactly one of the two limits")
    if min_bytes is None and min_ratio is None:
        if required:
            raise ConfigError(f"{bytes_key} or {ratio_key} is required while the storage check is enabled "
                              f"({PREFIX}storage.check.interval > PT0S)")
        return None
    return StorageLimit(min_bytes, min_ratio, lead_time=values["storage.per.volume.limit.lead.time"])


def with_soft_zone(values: Mapping[str, object], limit: StorageLimit | None) -> StorageLimit | None:
    """The hard limit with its soft zone: a soft limit of the hard limit's kind, strictly above it, and a
    `produce` quota for it to scale (the soft factor has nothing else to act on)."""
    given = [(kind, PREFIX + key, values[key]) for kind, key in enumerate(SOFT_KEYS) if values[key] is not None]
    if not given:
        return limit
    if len(given) == 2:
        raise ConfigError(f"{given[0][1]}={given[0][2]} and {given[1][1]}={given[1][2]}: set at most one soft limit")
    (kind, soft_key, soft), = given
    hard = None if limit is None else (limit.min_available_bytes, limit.min_available_ratio)[kind]
    if hard is None:
        raise ConfigError(f"{soft_key}={soft}: a soft limit needs a hard limit of its kind, "
                          f"{PREFIX}{HARD_KEYS[kind]}" + ("" if limit is None else
                          f" (the hard limit is {PREFIX}{HARD_KEYS[1 - kind]}: use {PREFIX}{SOFT_KEYS[1 - kind]})"))
    if soft <= hard:
        raise ConfigError(f"{soft_key}={soft}: must be above the hard limit {PREFIX}{HARD_KEYS[kind]}={hard}")
    if values["produce"] is None:
        raise ConfigError(f"{soft_key}={soft} needs {PREFIX}produce: the soft zone scales the producer quota, "
                          "and without one there is nothing to scale")
    return replace(limit, **{("soft_min_available_bytes", "soft_min_available_ratio")[kind]: soft})


def with_descent(values: Mapping[str, object], limit: StorageLimit | None, check_interval: timedelta) -> StorageLimit | None:
    """The hard limit with where the descent starts: a level of the hard limit's kind above it (twice the hard
    limit unless set; for a ratio at most halfway to 1), and a horizon (2 x (check interval + step) unless set)."""
    given = [(kind, PREFIX + key, values[key]) for kind, key in enumerate(DESCENT_KEYS) if values[key] is not None]
    if len(given) == 2:
        raise ConfigError(f"{given[0][1]}={given[0][2]} and {given[1][1]}={given[1][2]}: set at most one start of the descent")
    if limit is None:
        if given:
            raise ConfigError(f"{given[0][1]}={given[0][2]}: the descent needs a hard limit of its kind")
        return None
    hard_kind = 0 if limit.min_available_bytes is not None else 1
    hard = (limit.min_available_bytes, limit.min_available_ratio)[hard_kind]
    if given:
        (kind, key, start), = given
        if kind != hard_kind:
            raise ConfigError(f"{key}={start}: the hard limit is {PREFIX}{HARD_KEYS[hard_kind]}: "
                              f"use {PREFIX}{DESCENT_KEYS[hard_kind]}")
        if start < hard:
            raise ConfigError(f"{key}={start}: must not be below the hard limit {PREFIX}{HARD_KEYS[kind]}={hard}")
    else:
        start = 2 * hard if hard_kind == 0 else min(2 * hard, (1 + hard) / 2)
    horizon = values["storage.per.volume.descent.horizon"]
    if horizon is None:
        horizon = 2 * (check_interval + values["produce.descent.step"])
    return replace(limit, descent_horizon=horizon or None,
                   **{("descent_min_available_bytes", "descent_min_available_ratio")[hard_kind]: start})
