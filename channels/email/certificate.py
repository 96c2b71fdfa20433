"""A mail server's TLS certificate that failed verification, told apart from the network failing.

An untrusted certificate (self-signed, another host's name, expired) is the operator's to fix (the
host name, or the CA in the gateway's trust store), so on save it is a refusal with its reason, not
a server to try again later. The libraries wrap the ``ssl`` error (aiosmtplib in
``SMTPConnectError``), so the error is looked for in the chain of causes.
"""

from __future__ import annotations

import ssl

__all__ = ["untrusted_certificate"]


def untrusted_certificate(exc: BaseException, protocol: str, host: str) -> str | None:
    """The operator's words for ``exc`` when it is (or was caused by) a certificate verification failure."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, ssl.SSLCertVerificationError):
            reason = cause.verify_message or cause.reason or str(cause)
            return (f"{protocol} {host}: the server's TLS certificate was not trusted ({reason}): check the "
                    f"host name, or add the certificate's CA to the gateway's trust store")
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None
