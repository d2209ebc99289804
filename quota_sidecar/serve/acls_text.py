"""`quota-sidecar acls` as people and machines read it: the kafka-acls commands, each after what needs it and
what happens without it; the docs' table (least-privilege.md); JSON. What is needed is decide/acls.py's."""

from __future__ import annotations

import shlex

from ..configuration.settings import SidecarConfig
from ..decide import acls as permissions


def _servers(config: SidecarConfig, cluster: str) -> str:
    """The bootstrap servers of the cluster an ACL is granted on."""
    watched = cluster == permissions.WATCHED
    return config.admin_properties["bootstrap.servers"] if watched else config.pipeline.bootstrap_servers


def commands(found, config: SidecarConfig, principal: str, processes: list[str], command_config: str | None) -> str:
    """The kafka-acls.sh commands, grouped by the cluster they go to."""
    lines = [f"# What {principal} needs for {', '.join(permissions.SHOWN[p] for p in processes)} with this "
             "configuration, as Kafka's authorizer checks it (docs: Least privilege).",
             "# Not listed: what a listed ACL implies (READ, WRITE and ALTER imply DESCRIBE, ALTER_CONFIGS implies "
             "DESCRIBE_CONFIGS), and ZooKeeper, reached with its own authentication."]
    if any(acl.condition for acl in found):
        lines.append("# 'Needed when': what depends on more than this configuration says, e.g. what the agent reads "
                     "in its broker's pod from the broker's server.properties (another --config).")
    headers = {permissions.WATCHED: "the watched cluster: kafka.admin.bootstrap.servers="
                                    + _servers(config, permissions.WATCHED),
               permissions.PIPELINE: "the pipeline's topics: pipeline.bootstrap.servers="
                                     + _servers(config, permissions.PIPELINE)
                                     + ("" if config.pipeline.named else " (not set: the watched cluster)")}
    config_option = ["--command-config", shlex.quote(command_config)] if command_config else []
    for cluster, header in headers.items():
        listed = [acl for acl in found if acl.cluster == cluster]
        lines += ["", f"# ---- {header}"] if listed else []
        for acl in listed:
            lines += [f"# {line}" for line in _reasons(acl, several=len(processes) > 1)]
            resource = (["--cluster"] if acl.resource.kind == permissions.CLUSTER
                        else ["--topic", shlex.quote(acl.resource.name)])
            lines.append(" ".join(["kafka-acls.sh", "--bootstrap-server", shlex.quote(_servers(config, cluster)),
                                   *config_option, "--add", "--allow-principal", shlex.quote(principal), "--operation",
                                   acl.operation.title().replace("_", ""), *resource]))
    return "\n".join(lines)


def _reasons(acl, several: bool) -> list[str]:
    """One line per need: the feature and the Kafka API, what happens without it; why '*' for a topic."""
    lines = [f"Needed when {acl.condition}."] if acl.condition else []
    for need in acl.needs:
        who = f"{permissions.SHOWN[need.process]}: " if several else ""
        implied = "" if acl.grants(need) else f" ({need.operation} on {need.resource}, which this ACL implies)"
        lines.append(f"{who}{_feature(acl, need)}: {need.api}{implied}. Without it: {need.without}")
    if acl.resource.name == permissions.ANY_TOPIC:
        lines.append(f"TOPIC '*': {permissions.ANY_TOPIC_WHY}")
    if acl.caution:
        lines.append(f"CAUTION: {acl.caution}")
    return list(dict.fromkeys(lines))


def _feature(acl, need) -> str:
    """The feature that needs it, and when if the ACL is needed without that condition (for another need)."""
    return need.feature if acl.condition or not need.condition else f"{need.feature}, needed when {need.condition}"


def table(*acl_sets) -> str:
    """The ACLs as a Markdown table: one row per ACL of each set (the docs': one set per process), one line
    per feature in a cell."""
    def by_feature(acl, text, when: bool = False) -> str:
        grouped: dict[str, list[str]] = {}
        for need in acl.needs:
            grouped.setdefault(_feature(acl, need) if when else need.feature, []).append(text(acl, need))
        return "<br>".join(f"{feature}: {'; '.join(dict.fromkeys(texts))}" for feature, texts in grouped.items())

    def api(acl, need) -> str:
        return need.api + ("" if acl.grants(need) else f" ({need.operation}, implied)")

    def needed_when(acl) -> str:
        return f"needed when {acl.condition}:<br>" if acl.condition else ""

    lines = ["| process | operation | resource | which feature needs it (Kafka API) | what happens without it |",
             "|---|---|---|---|---|"]
    for found in acl_sets:
        for acl in found:
            resource = "CLUSTER" if acl.resource.kind == permissions.CLUSTER else f"TOPIC `{acl.resource.name}`"
            lines.append(f"| {', '.join(permissions.SHOWN[p] for p in acl.processes)} | {acl.operation} | {resource}"
                         f"{' (pipeline)' if acl.cluster == permissions.PIPELINE else ''} | {needed_when(acl)}"
                         f"{by_feature(acl, api, when=True)} | "
                         f"{by_feature(acl, lambda _, need: need.without)} |")
    return "\n".join(lines)


def _as_json(acl, principal: str, servers: str) -> dict:
    return {"cluster": acl.cluster, "bootstrap_servers": servers, "principal": principal, "host": "*",
            "permission": "ALLOW", "operation": acl.operation, "resource_type": acl.resource.kind,
            "resource_name": acl.resource.name, "pattern_type": "LITERAL", "processes": list(acl.processes),
            "caution": acl.caution, "condition": acl.condition,
            "needs": [{"process": n.process, "feature": n.feature, "api": n.api, "operation": n.operation,
                       "resource": str(n.resource), "without": n.without, "condition": n.condition}
                      for n in acl.needs]}


def as_json(found, config: SidecarConfig, principal: str) -> list[dict]:
    return [_as_json(acl, principal, _servers(config, acl.cluster)) for acl in found]
