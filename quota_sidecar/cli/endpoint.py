"""Where the commands that ask a sidecar find it: --url, or this host's own from its configuration."""

from __future__ import annotations

from ..configuration import config as configuration

DEFAULT_URL = ("default this host's: http.host and http.plain.port when set, else http.port (https with http.tls.*, "
               "trusting exactly its certificate file)")


def reach(url: str | None, config: configuration.SidecarConfig | None):
    """(URL, TLS context) of the sidecar to ask: --url as given (another sidecar's https: its CA), else this host's,
    over https trusting exactly its certificate file."""
    return (url, None) if url else (_endpoint(config), _pinned(config))


def _endpoint(config: configuration.SidecarConfig | None) -> str:
    """Where this host's sidecar answers: its plain listener when it has one beside https."""
    if config is None:
        return "http://127.0.0.1:8080"
    if config.http_tls is not None and config.http_plain_port is None:
        return f"https://{config.http_host}:{config.http_port}"
    return f"http://{config.http_host}:{config.http_plain_port or config.http_port}"


def _pinned(config: configuration.SidecarConfig | None):
    """For https to this host's sidecar: trust exactly its certificate file, whatever names the certificate
    carries (the pod's own, not 127.0.0.1)."""
    if config is None or config.http_tls is None:
        return None
    import ssl

    context = ssl.create_default_context(cafile=config.http_tls[0])
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # the leaf itself is the anchor
    context.check_hostname = False
    return context

