"""Synthetic histories of Kafka volumes: a retention sawtooth with a known net growth, as Parquet in the
aggregator's layout (cluster=…/day=…), for the forecast's tests and benchmarks.

Each volume is written at ``write_bytes_per_day`` and, at the end of every retention cycle, retention deletes
what was written in the cycle but ``growth_bytes_per_day`` × the cycle: the used bytes climb for a cycle, drop,
and their peaks rise by exactly the net growth. ``used_at`` gives the used bytes at any time, so a test knows the
true moment a volume reaches a level (``first_reaching``) without trusting the forecast.

    .venv/bin/python benchmarks/history_generator.py --out /tmp/history --volumes 6 --days 60 \\
        --interval PT10M --growth-per-day 2GiB --cycle P7D
"""
from __future__ import annotations

import argparse
import random
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import isodate

GIB = 1 << 30
START = datetime(2026, 9, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Sawtooth:
    """One volume's used bytes: ``base`` at the start, ``write_bytes_per_day`` within a cycle, ``growth_bytes_per_day``
    kept from each cycle; ``phase`` of a cycle already gone at ``start`` (the history need not begin with one)."""
    total_bytes: int
    base_bytes: float
    write_bytes_per_day: float
    growth_bytes_per_day: float
    cycle: timedelta
    start: datetime = START
    phase: timedelta = timedelta(0)
    jitter: float = 0.0  # each cycle's write rate off by up to this share, at random: its peak off the line

    def used_at(self, at: datetime) -> float:
        days = (at - self.start + self.phase) / timedelta(days=1)
        cycle_days = self.cycle / timedelta(days=1)
        cycles, into = divmod(days, cycle_days)
        return (self.base_bytes + self.growth_bytes_per_day * cycle_days * cycles
                + self._write_rate(int(cycles)) * into)

    def _write_rate(self, cycle: int) -> float:
        if not self.jitter:
            return self.write_bytes_per_day
        return self.write_bytes_per_day * (1 + self.jitter * random.Random(cycle * 7919 + 17).uniform(-1, 1))

    def first_reaching(self, used_bytes: float) -> datetime:
        """The first moment from ``start`` at which the used bytes reach ``used_bytes``: in the first cycle whose
        climb gets there (cycle k climbs from base + growth × cycle × k at the write rate)."""
        cycle_days = self.cycle / timedelta(days=1)
        origin = self.start - self.phase
        for k in range(int(36500 / cycle_days) + 1):
            climb_days = max(0.0, (used_bytes - self.base_bytes - self.growth_bytes_per_day * cycle_days * k)
                             / self._write_rate(k))
            at = origin + timedelta(days=k * cycle_days + climb_days)
            if climb_days < cycle_days and origin + timedelta(days=(k + 1) * cycle_days) > self.start:
                return max(at, self.start)
        raise ValueError(f"the volume does not reach {used_bytes:.0f} bytes within a century")


def rows(volumes: list[tuple[str, int, str, Sawtooth]], days: float, interval: timedelta,
         noise_ratio: float = 0.0, seed: int = 17) -> list[dict]:
    """History rows (spark_jobs.history.COLUMNS and ``day``) of each (cluster, broker, log dir, sawtooth), every
    ``interval`` for ``days``; ``noise_ratio`` of the written bytes of an interval added or taken at random (writes
    come in bursts), with ``noise_ratio`` <= 1 never below the last value within a cycle (used bytes fall only
    when retention deletes)."""
    chance = random.Random(seed)
    out = []
    steps = int(timedelta(days=days) / interval)
    for cluster, broker, log_dir, tooth in volumes:
        for step in range(steps + 1):
            at = tooth.start + step * interval
            used = tooth.used_at(at)
            if noise_ratio:
                used += noise_ratio * tooth.write_bytes_per_day * (interval / timedelta(days=1)) * chance.uniform(0, 1)
            used = min(round(used), tooth.total_bytes)
            out.append({"cluster": cluster, "broker": broker, "log_dir": log_dir, "observed_at": at,
                        "total_bytes": tooth.total_bytes, "available_bytes": tooth.total_bytes - used,
                        "day": at.date().isoformat()})
    return out


def fleet(count: int, growth_bytes_per_day: float, cycle: timedelta, total_bytes: int = 1000 * GIB,
          clusters: int = 2, jitter: float = 0.0) -> list[tuple[str, int, str, Sawtooth]]:
    """``count`` volumes over ``clusters`` clusters: every third one only cycles (no net growth), the others grow
    by ``growth_bytes_per_day`` times 1, 2, …; each with a phase of its own."""
    volumes = []
    for index in range(count):
        growth = 0.0 if index % 3 == 2 else growth_bytes_per_day * (1 + index % 3)
        write = max(4 * growth, 0.04 * total_bytes / (cycle / timedelta(days=1)))
        tooth = Sawtooth(total_bytes, base_bytes=0.3 * total_bytes + 0.05 * total_bytes * (index % 4),
                         write_bytes_per_day=write, growth_bytes_per_day=growth, cycle=cycle,
                         phase=cycle * ((index * 0.37) % 1), jitter=jitter)
        volumes.append((f"cluster-{chr(ord('a') + index % clusters)}", 1 + index // clusters, "/var/lib/kafka/data",
                        tooth))
    return volumes


def write_parquet(history_rows: list[dict], path: str) -> None:
    """The rows as Parquet at ``path``, partitioned as the aggregator writes them (cluster=…/day=…)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(history_rows, schema=pa.schema([
        ("cluster", pa.string()), ("broker", pa.int32()), ("log_dir", pa.string()),
        ("observed_at", pa.timestamp("us", tz="UTC")), ("total_bytes", pa.int64()), ("available_bytes", pa.int64()),
        ("day", pa.string())]))
    pq.write_to_dataset(table, path, partition_cols=["cluster", "day"])


def _size(text: str) -> float:
    units = {"KIB": 1 << 10, "MIB": 1 << 20, "GIB": GIB, "TIB": 1 << 40, "B": 1}
    for unit, factor in units.items():
        if text.upper().endswith(unit):
            return float(text[:-len(unit)]) * factor
    return float(text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the history's folder (Parquet, cluster=…/day=…)")
    parser.add_argument("--volumes", type=int, default=6)
    parser.add_argument("--clusters", type=int, default=2)
    parser.add_argument("--days", type=float, default=60)
    parser.add_argument("--interval", default="PT10M", help="ISO-8601 duration between observations")
    parser.add_argument("--growth-per-day", default="2GiB", help="net growth of the first volume (B, MiB, GiB…)")
    parser.add_argument("--cycle", default="P7D", help="the retention cycle, ISO-8601")
    parser.add_argument("--total", default="1000GiB")
    parser.add_argument("--noise", type=float, default=0.5, help="burstiness: share of an interval's writes")
    parser.add_argument("--jitter", type=float, default=0.0, help="each cycle's write rate off by up to this share")
    args = parser.parse_args(argv)
    volumes = fleet(args.volumes, _size(args.growth_per_day), isodate.parse_duration(args.cycle),
                    int(_size(args.total)), args.clusters, args.jitter)
    history = rows(volumes, args.days, isodate.parse_duration(args.interval), args.noise)
    write_parquet(history, args.out)
    print(f"{len(history)} rows of {len(volumes)} volumes over {args.days:g} days to {args.out}")
    for cluster, broker, log_dir, tooth in volumes:
        print(f"  {cluster} broker {broker} {log_dir}: net growth {tooth.growth_bytes_per_day / GIB:.2f} GiB/day, "
              f"writes {tooth.write_bytes_per_day / GIB:.2f} GiB/day, cycle {isodate.duration_isoformat(tooth.cycle)}")


if __name__ == "__main__":
    main()
