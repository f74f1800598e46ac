"""A secured local cluster: the security plugin's certificates, users and config for each node.

`up(secure=True)` loads the opensearch-security 2.19.1.0 plugin (devcluster.plugins) and, per
state dir, makes once:

    <state>/security/ca.pem, ca-key.pem           a CA that signs everything below
    <state>/security/node.pem, node-key.pem       every node's HTTP and transport certificate
    <state>/security/admin.pem, admin-key.pem     the super-admin certificate (admin_dn)
    <state>/security/client.pem, client-key.pem   a client certificate for user `suli-client`
    <state>/security/admin-password               the `admin` user's password (mode 0600)

Each node's config dir gets a copy of the CA and node files and the security config
(config/opensearch-security/*.yml), which the plugin loads into its index on first start
(`plugins.security.allow_default_init_securityindex`): the embedded launcher has no bin/
scripts, so securityadmin.sh is not needed. `admin` is mapped to all_access and may use the
security REST API; Suli's least-privilege roles are applied over that API (`suli security
roles --apply`).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import json
import secrets
import shutil
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bcrypt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PLUGIN = "security"  # devcluster.plugins.KNOWN name
ADMIN_USER = "admin"
CLIENT_CERT_USER = "suli-client"  # the CN of client.pem: the user a client certificate maps to
ORG = "suli-dev"
DIR = "security"
CONFIG_SUBDIR = "opensearch-security"
# Node certificates name the host clients dial: 127.0.0.1, where devcluster binds, and
# localhost. Any other name (or address) is a wrong-host certificate to a verifying client.
HOSTS = ("localhost",)
ADDRESSES = ("127.0.0.1",)
_DAYS = 825  # the longest validity browsers and TLS stacks accept for a leaf certificate


def _dn(cn: str) -> x509.Name:
    # O, OU, CN: rfc4514_string() prints them CN first, as the plugin's admin_dn expects.
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORG),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "suli"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def dn(cn: str) -> str:
    """The distinguished name of a certificate made here, as the plugin's settings spell it."""
    return _dn(cn).rfc4514_string()


NODE_DN = dn("node")
ADMIN_DN = dn("admin")


@dataclass(frozen=True)
class Material:
    """The files of one state dir's security set-up."""

    root: Path  # <state>/security

    def path(self, name: str) -> Path:
        return self.root / name

    @property
    def ca(self) -> Path:
        return self.path("ca.pem")

    @property
    def password_file(self) -> Path:
        return self.path("admin-password")

    @property
    def admin_password(self) -> str:
        return self.password_file.read_text().strip()

    def cert(self, who: str) -> tuple[Path, Path]:
        """(certificate, key) of `node`, `admin` or `client`."""
        return self.path(f"{who}.pem"), self.path(f"{who}-key.pem")

    def complete(self) -> bool:
        names = ["ca.pem", "ca-key.pem", "admin-password"]
        names += [f"{w}{s}.pem" for w in ("node", "admin", "client") for s in ("", "-key")]
        return all(self.path(n).is_file() for n in names)


def material(state_root: Path) -> Material:
    return Material(state_root / DIR)


def _key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _write_key(path: Path, key: rsa.RSAPrivateKey) -> None:
    # PKCS#8, unencrypted: the only private-key form the plugin's PEM settings read.
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    path.write_bytes(data)
    path.chmod(0o600)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _builder(
    subject: x509.Name, issuer: x509.Name, key: rsa.RSAPrivateKey
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))  # clock skew between tools
        .not_valid_after(now + dt.timedelta(days=_DAYS))
    )


def _leaf(
    cn: str,
    ca_cert: x509.Certificate,
    ca_key: rsa.RSAPrivateKey,
    usages: list[x509.ObjectIdentifier],
    san: list[x509.GeneralName] | None = None,
) -> tuple[x509.Certificate, rsa.RSAPrivateKey]:
    key = _key()
    builder = _builder(_dn(cn), ca_cert.subject, key)
    builder = builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
    builder = builder.add_extension(
        x509.KeyUsage(True, False, True, False, False, False, False, False, False), True
    )
    builder = builder.add_extension(x509.ExtendedKeyUsage(usages), False)
    if san:
        builder = builder.add_extension(x509.SubjectAlternativeName(san), False)
    return builder.sign(ca_key, hashes.SHA256()), key


def make_material(state_root: Path) -> Material:
    """The CA, node, admin and client certificates and the admin password; made once per state
    dir (kept while they are complete, so a node started again trusts the same CA)."""
    made = material(state_root)
    if made.complete():
        return made
    made.root.mkdir(parents=True, exist_ok=True)
    made.root.chmod(0o700)
    ca_key = _key()
    ca_name = _dn("suli-dev-ca")
    ca_cert = (
        _builder(ca_name, ca_name, ca_key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), True
        )
        .sign(ca_key, hashes.SHA256())
    )
    _write_cert(made.ca, ca_cert)
    _write_key(made.path("ca-key.pem"), ca_key)
    both = [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
    san: list[x509.GeneralName] = [x509.DNSName(h) for h in HOSTS]
    san += [x509.IPAddress(ipaddress.ip_address(a)) for a in ADDRESSES]
    # Transport TLS is mutual: a node is server and client of the others, hence both usages.
    leaves = {
        "node": _leaf("node", ca_cert, ca_key, both, san),
        "admin": _leaf("admin", ca_cert, ca_key, [ExtendedKeyUsageOID.CLIENT_AUTH]),
        "client": _leaf(CLIENT_CERT_USER, ca_cert, ca_key, [ExtendedKeyUsageOID.CLIENT_AUTH]),
    }
    for who, (cert, key) in leaves.items():
        cert_path, key_path = made.cert(who)
        _write_cert(cert_path, cert)
        _write_key(key_path, key)
    made.password_file.write_text(secrets.token_urlsafe(18) + "\n")
    made.password_file.chmod(0o600)
    return made


def bcrypt_hash(password: str) -> str:
    """The plugin's internal_users.yml `hash`: BCrypt, $2a$ with cost 12, as hash.sh makes."""
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=12, prefix=b"2a")).decode()


def _meta(kind: str) -> dict[str, Any]:
    return {"_meta": {"type": kind, "config_version": 2}}


def config_files(admin_password: str) -> dict[str, dict[str, Any]]:
    """The security config a node loads on first start, file name -> content (written as JSON,
    which YAML reads as it is)."""
    basic = {
        "http_enabled": True,
        "transport_enabled": True,
        "order": 0,
        # No challenge: a request without a password goes on to the certificate domain,
        # and one with neither is answered 401 all the same.
        "http_authenticator": {"type": "basic", "challenge": False},
        "authentication_backend": {"type": "intern"},
    }
    clientcert = {
        "http_enabled": True,
        "transport_enabled": False,
        "order": 1,
        "http_authenticator": {"type": "clientcert", "config": {"username_attribute": "cn"}},
        "authentication_backend": {"type": "noop"},
    }
    config = {
        "dynamic": {
            "http": {"anonymous_auth_enabled": False},
            "authc": {"basic_internal_auth_domain": basic, "clientcert_auth_domain": clientcert},
            "authz": {},
        }
    }
    return {
        "config.yml": {**_meta("config"), "config": config},
        "internal_users.yml": {
            **_meta("internalusers"),
            ADMIN_USER: {"hash": bcrypt_hash(admin_password), "reserved": True},
        },
        "roles.yml": _meta("roles"),
        "roles_mapping.yml": {
            **_meta("rolesmapping"),
            "all_access": {"reserved": False, "users": [ADMIN_USER]},
        },
        "action_groups.yml": _meta("actiongroups"),
        "tenants.yml": _meta("tenants"),
    }


def node_settings() -> dict[str, object]:
    """The opensearch.yml lines that turn the plugin on: TLS for HTTP and transport from the
    node's config dir, the admin and node DNs, and the REST API for all_access."""
    certs = "certs"
    ssl_files = {
        "pemcert_filepath": f"{certs}/node.pem",
        "pemkey_filepath": f"{certs}/node-key.pem",
        "pemtrustedcas_filepath": f"{certs}/ca.pem",
    }
    out: dict[str, object] = {}
    for layer in ("transport", "http"):
        out.update({f"plugins.security.ssl.{layer}.{k}": v for k, v in ssl_files.items()})
    out.update(
        {
            "plugins.security.ssl.http.enabled": True,
            # Optional: a client may log in with a certificate (clientcert domain) or a password.
            "plugins.security.ssl.http.clientauth_mode": "OPTIONAL",
            # Every node has the same certificate for 127.0.0.1; the DN list says who is a node.
            "plugins.security.ssl.transport.enforce_hostname_verification": False,
            "plugins.security.allow_default_init_securityindex": True,
            "plugins.security.authcz.admin_dn": [ADMIN_DN],
            "plugins.security.nodes_dn": [NODE_DN],
            "plugins.security.restapi.roles_enabled": ["all_access"],
            "plugins.security.audit.type": "noop",
        }
    )
    return out


def install(state_root: Path, home: Path) -> Material:
    """Write the certificates and the security config into one node's config dir."""
    made = make_material(state_root)
    config = home / "config"
    certs = config / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    for name in ("ca.pem", "node.pem", "node-key.pem"):
        shutil.copyfile(made.path(name), certs / name)
    (certs / "node-key.pem").chmod(0o600)
    security = config / CONFIG_SUBDIR
    security.mkdir(parents=True, exist_ok=True)
    for name, content in config_files(made.admin_password).items():
        (security / name).write_text(json.dumps(content, indent=2) + "\n")
    # The plugin warns about every config file others may read: they hold keys and hashes.
    for path in [config, *config.rglob("*")]:
        path.chmod(0o700 if path.is_dir() else 0o600)
    return made


def ssl_context(made: Material) -> ssl.SSLContext:
    """A client context trusting the state dir's CA (hostnames checked)."""
    return ssl.create_default_context(cafile=str(made.ca))


def admin_headers(made: Material) -> dict[str, str]:
    """Basic auth of the admin user, for health polling and status."""
    token = base64.b64encode(f"{ADMIN_USER}:{made.admin_password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}
