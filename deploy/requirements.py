"""The requirements a wheel declares (its METADATA's Requires-Dist without extras-only ones), one per line,
leaving out those named after --without: how the thin image installs the package without pyspark."""

import sys
import zipfile
from email.parser import Parser


def requirements(wheel: str, without: set[str]) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode())
    wanted = []
    for requirement in metadata.get_all("Requires-Dist") or []:
        if "extra ==" in requirement:
            continue
        project = requirement.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].strip()
        if project.lower() not in without:
            wanted.append(requirement.split(";")[0].strip())
    return wanted


if __name__ == "__main__":
    wheel, *rest = sys.argv[1:]
    without = {name.lower() for name in rest[rest.index("--without") + 1:]} if "--without" in rest else set()
    print("\n".join(requirements(wheel, without)))
