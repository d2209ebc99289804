"""How the commands lay numbers out for people: sizes, durations, aligned tables; what a write was doing."""

from __future__ import annotations


def size(value: float | None) -> str:
    """1.2 GiB; '?' when unknown."""
    if value is None or value < 0:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024


def duration(seconds: float | None) -> str:
    """4m10s, 1h05m, 12s; '-' when unknown."""
    if seconds is None:
        return "-"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def table(headers: list[str], rows: list[list]) -> str:
    """Left-aligned columns, two spaces in; None shows as '-'."""
    if not rows:
        return "  (none)"
    cells = [[str(h) for h in headers]] + [["-" if c is None else str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)


def writing(keys: list[str], place: str) -> str:
    """"writing 'a' and 2 more to P": what a failed write of several records names."""
    more = f" and {len(keys) - 1} more" if len(keys) > 1 else ""
    return f"writing {keys[0]!r}{more} to {place}"
