"""A secured cluster's faults (TLS, credentials, permissions) as one line naming what to fix.

The transport's own messages are urllib3 and OpenSSL reprs several levels deep; an operator
needs to know which SULI_ setting is wrong. Nothing here ever sees the password: the
messages come from the exception alone, and the client keeps credentials in a header.
"""

from __future__ import annotations

import re

import opensearchpy

CREDENTIALS = "SULI_OPENSEARCH_USER and SULI_OPENSEARCH_PASSWORD (or SULI_OPENSEARCH_CLIENT_CERT)"
GUIDE = 'docs/operations.md, "Deploying on a secured cluster"'
REFUSED = (opensearchpy.AuthenticationException, opensearchpy.AuthorizationException)
_NO_PERMISSION = re.compile(r"no permissions for \[([^\]]*)\] and User \[name=([^,\]]*)")


def _text(e: opensearchpy.TransportError) -> str:
    return f"{e.error} {e.info}"


def connection_fault(e: opensearchpy.ConnectionError) -> str | None:
    """What a TLS-related connection failure means and the setting to fix; None for any
    other connection failure (a node down, a refused port)."""
    text = _text(e)
    if "CERTIFICATE_VERIFY_FAILED" in text:
        if "mismatch" in text:  # "Hostname mismatch" / "IP address mismatch"
            return (
                "the node's TLS certificate does not name the host in SULI_OPENSEARCH_URL; "
                "use a host name the certificate lists"
            )
        return (
            "the node's TLS certificate is not signed by a CA Suli trusts; set "
            "SULI_OPENSEARCH_CA_CERTS to the cluster's CA file (PEM)"
        )
    if "WRONG_VERSION_NUMBER" in text or "record layer failure" in text:
        return "the node speaks plain HTTP, not TLS; use http:// in SULI_OPENSEARCH_URL"
    if "PEM lib" in text or "KEY_VALUES_MISMATCH" in text:
        return (
            "the client certificate or its key could not be loaded; check "
            "SULI_OPENSEARCH_CLIENT_CERT and SULI_OPENSEARCH_CLIENT_KEY"
        )
    if "RemoteDisconnected" in text:
        # What a TLS node does to plain HTTP: it closes the connection without a word (a
        # node that died mid-request does too, hence the "if").
        return (
            "the node closed the connection without an answer, as a TLS node does to plain "
            "HTTP; if the cluster runs TLS, use https:// in SULI_OPENSEARCH_URL"
        )
    return None


def refusal(e: opensearchpy.TransportError, what: str) -> str:
    """A 401 or 403 from the security plugin as one line."""
    if e.status_code == 401:
        return f"OpenSearch refused the credentials ({what}, 401): check {CREDENTIALS}"
    return permission_line(str(e.info), what)


def permission_line(reason: str, what: str) -> str:
    """A security plugin's 403 reason as one line naming the user and the missing action."""
    m = _NO_PERMISSION.search(reason)
    if m:
        action, user = m.groups()
        return (
            f"OpenSearch refused {what} (403): user {user!r} has no permission for {action}; "
            f"give it the Suli role that does this ({GUIDE})"
        )
    return f"OpenSearch refused {what} (403): permission denied ({GUIDE})"
