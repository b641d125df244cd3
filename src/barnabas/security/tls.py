"""TLS contexts from Kafka's ssl.* settings: a listener's server side, and this broker's client side.

Rules this module keeps (Kafka's DefaultSslEngineFactory, on OpenSSL through Python's ssl module):

- Only TLS 1.2 and 1.3. ``ssl.enabled.protocols`` gives the lowest and highest version accepted;
  ``ssl.protocol`` caps the highest (``TLSv1.2`` never negotiates 1.3, as in Kafka).
- The keystore is PEM: a file holding the private key and its certificate chain, or the inline
  ``ssl.keystore.certificate.chain`` and ``ssl.keystore.key`` (loaded from an anonymous in-memory
  file, never written to disk). ``ssl.key.password`` decrypts an encrypted key; without it an
  encrypted key is an error, never a prompt.
- The truststore is PEM (a file or inline); without one, the system's CAs are trusted, as the
  JVM's default truststore would be.
- ``ssl.client.auth``: ``none`` asks for no client certificate, ``requested`` verifies one if it
  is sent, ``required`` refuses a client without a valid one (mTLS).
- ``ssl.cipher.suites`` takes IANA names (Kafka's, from the JVM) or OpenSSL's. OpenSSL's TLS 1.3
  suites cannot be chosen one by one from Python: a list naming none of them turns TLS 1.3 off
  (as the JVM would, having no 1.3 suite enabled), one naming them all keeps it, and one naming
  only some is refused rather than served with suites the operator left out.
- The client side always verifies the broker's certificate; ``ssl.endpoint.identification.algorithm=https``
  (the default) also checks its host name.
- Every problem is a ConfigError naming the listener and the setting, on one line.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import tempfile
from collections.abc import Iterator
from typing import Any

from barnabas.config import ConfigError

__all__ = ["client_context", "server_context"]

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}

#: IANA (JVM) names of the TLS 1.2 suites OpenSSL knows by another name.
IANA_TO_OPENSSL = {
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256": "DHE-RSA-AES128-GCM-SHA256",
    "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384": "DHE-RSA-AES256-GCM-SHA384",
    "TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "DHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384": "ECDHE-ECDSA-AES256-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384": "ECDHE-RSA-AES256-SHA384",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
}


def server_context(listener: str, settings: dict[str, Any]) -> ssl.SSLContext:
    """The TLS context a listener serves with.

    Args:
        listener: the listener's name (for messages).
        settings: its ssl.* values (``BrokerConfig.ssl_for``).

    Raises:
        ConfigError: a setting cannot be honoured, or a key, certificate or CA file does not load.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _configure(context, listener, settings)
    _load_keystore(context, listener, settings)
    client_auth = settings["ssl.client.auth"]
    if client_auth != "none":
        context.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
        _load_truststore(context, listener, settings, ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(listener: str, settings: dict[str, Any]) -> ssl.SSLContext:
    """The TLS context this broker connects to other brokers' ``listener`` with.

    Raises:
        ConfigError: as :func:`server_context`.
    """
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _configure(context, listener, settings)
    context.check_hostname = settings["ssl.endpoint.identification.algorithm"].lower() == "https"
    context.verify_mode = ssl.CERT_REQUIRED
    if settings["ssl.keystore.location"] is not None or settings["ssl.keystore.key"] is not None:
        _load_keystore(context, listener, settings)  # for brokers that ask for a client certificate
    _load_truststore(context, listener, settings, ssl.Purpose.SERVER_AUTH)
    return context


def _configure(context: ssl.SSLContext, listener: str, settings: dict[str, Any]) -> None:
    enabled = sorted(_VERSIONS[name] for name in settings["ssl.enabled.protocols"])
    lowest, highest = enabled[0], enabled[-1]
    cap = _VERSIONS.get(settings["ssl.protocol"])  # "TLS": no cap
    if cap is not None and cap < highest:
        highest = cap
    if highest < lowest:
        raise ConfigError(
            f"listener {listener}: ssl.protocol={settings['ssl.protocol']} allows none of ssl.enabled.protocols"
        )
    if settings["ssl.cipher.suites"]:
        lowest, highest = _set_cipher_suites(context, listener, settings["ssl.cipher.suites"], lowest, highest)
    context.minimum_version = lowest
    context.maximum_version = highest


def _set_cipher_suites(
    context: ssl.SSLContext, listener: str, suites: list[str], lowest: ssl.TLSVersion, highest: ssl.TLSVersion
) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """Apply ssl.cipher.suites; the TLS versions that still have a suite.

    Raises:
        ConfigError: an unknown suite, only some of OpenSSL's TLS 1.3 suites, or no suite of an enabled version.
    """
    where = f"listener {listener}: ssl.cipher.suites"
    tls13 = {cipher["name"] for cipher in context.get_ciphers() if cipher["protocol"] == "TLSv1.3"}
    named13 = {suite for suite in suites if suite in tls13}
    older = [IANA_TO_OPENSSL.get(suite, suite) for suite in suites if suite not in tls13]
    for suite in older:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(suite)
        except ssl.SSLError:
            raise ConfigError(f"{where}: unknown cipher suite {suite}") from None
    if named13 and named13 != tls13:
        listed = ", ".join(sorted(tls13))
        raise ConfigError(f"{where}: TLS 1.3 suites can only be enabled all together here ({listed}) or not at all")
    if older:
        context.set_ciphers(":".join(older))
    else:
        lowest = max(lowest, ssl.TLSVersion.TLSv1_3)  # no TLS 1.2 suite left
    if not named13:
        highest = min(highest, ssl.TLSVersion.TLSv1_2)  # no TLS 1.3 suite left
    if highest < lowest:
        raise ConfigError(f"{where}: names no suite of an enabled TLS version")
    return lowest, highest


def _load_keystore(context: ssl.SSLContext, listener: str, settings: dict[str, Any]) -> None:
    password = settings["ssl.key.password"]
    # Without a password an encrypted key fails rather than prompting on the terminal.
    secret: Any = password if password is not None else (lambda: b"")
    location = settings["ssl.keystore.location"]
    where = f"listener {listener}: " + (f"ssl.keystore.location {location}" if location else "ssl.keystore.key")
    try:
        if location is not None:
            context.load_cert_chain(location, password=secret)
        else:
            pem = settings["ssl.keystore.certificate.chain"].strip() + "\n" + settings["ssl.keystore.key"].strip()
            with _anonymous_file(pem + "\n") as path:
                context.load_cert_chain(path, password=secret)
    except ssl.SSLError as exc:
        raise ConfigError(f"{where}: not a PEM private key with its certificate chain, or a wrong key "
                          f"password ({exc.reason or exc})") from None  # fmt: skip
    except OSError as exc:
        raise ConfigError(f"{where}: {exc.strerror or exc}") from None


def _load_truststore(context: ssl.SSLContext, listener: str, settings: dict[str, Any], purpose: ssl.Purpose) -> None:
    location = settings["ssl.truststore.location"]
    inline = settings["ssl.truststore.certificates"]
    try:
        if location is not None:
            context.load_verify_locations(cafile=location)
        elif inline is not None:
            context.load_verify_locations(cadata=inline)
        else:
            context.load_default_certs(purpose)
    except ssl.SSLError as exc:
        what = f"ssl.truststore.location {location}" if location else "ssl.truststore.certificates"
        raise ConfigError(f"listener {listener}: {what}: no PEM certificates ({exc.reason or exc})") from None
    except OSError as exc:
        raise ConfigError(f"listener {listener}: ssl.truststore.location {location}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def _anonymous_file(text: str) -> Iterator[str]:
    """A path that reads ``text`` for the duration: an in-memory file where Linux has them, else a private one."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("barnabas-keystore", os.MFD_CLOEXEC)
        try:
            _write_all(fd, text.encode())
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(prefix="barnabas-keystore-", suffix=".pem")  # mode 0600
    try:
        _write_all(fd, text.encode())
        os.close(fd)
        yield path
    finally:
        os.unlink(path)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
