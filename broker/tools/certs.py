"""A self-signed CA and certificates signed by it, for ``pylog cluster up --security`` and the
tests: PEM files made with the ``openssl`` command (Debian's openssl package; no Python
dependency). Keys are unencrypted P-256 PEM (0600), certificates last ``days_valid`` days; the broker
certificate names ``localhost`` and ``127.0.0.1`` (and any extra hosts) so clients can check the
host name (Kafka's default ``ssl.endpoint.identification.algorithm=https``).

Layout under ``directory``: ``ca.pem``/``ca.key`` (the truststore), ``<name>.pem`` holding the key
and the certificate (a PEM keystore, Kafka's ``ssl.keystore.type=PEM``), ``<name>.crt``/``.key``.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["make_ca", "make_certificate"]

# P-256 keys: made in milliseconds (RSA-2048 takes ~0.1-1 s each on a loaded machine), and every
# client here (Python's ssl, librdkafka, Java) speaks ECDSA.
_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1")


def _openssl(*args: str, cwd: Path) -> None:
    result = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed: {result.stderr.strip()}")


def make_ca(directory: Path, subject: str = "/CN=pylog-ca", days_valid: int = 365) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    _openssl("req", "-x509", *_KEY, "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
             "-days", str(days_valid), "-subj", subject, "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)
    (directory / "ca.key").chmod(0o600)
    return directory / "ca.pem"


def make_certificate(directory: Path, name: str, subject: str, hosts: tuple[str, ...] = ("localhost", "127.0.0.1"),
                     days_valid: int = 365, ca: str = "ca") -> Path:
    """``<name>.pem`` (key + certificate, signed by ``<ca>.pem``); returns its path."""
    sans = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() or ":" in h else f"DNS:{h}" for h in hosts)
    _openssl("req", *_KEY, "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
             "-subj", subject, cwd=directory)
    ext = directory / f"{name}.ext"
    ext.write_text(f"subjectAltName={sans}\nextendedKeyUsage=serverAuth,clientAuth\n" if sans else
                   "extendedKeyUsage=serverAuth,clientAuth\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-out", f"{name}.crt", "-days", str(days_valid), "-extfile", ext.name,
             cwd=directory)
    key = directory / f"{name}.key"
    key.chmod(0o600)
    pem = directory / f"{name}.pem"
    pem.write_text(key.read_text() + (directory / f"{name}.crt").read_text())
    pem.chmod(0o600)
    return pem
