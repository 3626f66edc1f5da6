"""A certificate authority and the certificates it signs, for `weir up --secure` and the tests.

    ca = CertificateAuthority.create(directory / "ca")      # ca.pem (certificate), ca-key.pem
    ca.issue(directory / "broker-0.pem", "broker-0", hosts=["127.0.0.1", "localhost"])

`issue` writes one PEM file holding the private key and the certificate chain: Kafka's PEM key
store (`ssl.keystore.type=PEM`, `ssl.keystore.location`). Keys are EC P-256, written 0600.
"""

import datetime
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 825  # what browsers and Apple's TLS accept for a leaf certificate


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@dataclass
class CertificateAuthority:
    certificate: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    path: Path  # the CA certificate in PEM: the clients' trust store

    @classmethod
    def create(cls, certificate_path: Path, name: str = "Weir local CA") -> "CertificateAuthority":
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.timezone.utc)
        certificate = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                       .public_key(key.public_key()).serial_number(x509.random_serial_number())
                       .not_valid_before(now - datetime.timedelta(minutes=5))
                       .not_valid_after(now + datetime.timedelta(days=3650))
                       .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                       .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False),
                                      critical=True)
                       .sign(key, hashes.SHA256()))
        certificate_path = Path(certificate_path)
        certificate_path.parent.mkdir(parents=True, exist_ok=True)
        certificate_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
        _write_private(certificate_path.with_name(certificate_path.stem + "-key.pem"), _key_pem(key))
        return cls(certificate, key, certificate_path)

    @classmethod
    def load(cls, certificate_path: Path) -> "CertificateAuthority":
        certificate_path = Path(certificate_path)
        certificate = x509.load_pem_x509_certificate(certificate_path.read_bytes())
        key = serialization.load_pem_private_key(
            certificate_path.with_name(certificate_path.stem + "-key.pem").read_bytes(), None)
        return cls(certificate, key, certificate_path)

    def issue(self, path: Path, common_name: str, hosts: list[str] = (), *, organizational_unit: str = "") -> Path:
        """A key and a certificate for `common_name`, valid for `hosts` (names or IP addresses), as a
        server and as a client; written with the CA's certificate after it (the chain)."""
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organizational_unit:
            attributes.insert(0, x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, organizational_unit))
        names = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        now = datetime.datetime.now(datetime.timezone.utc)
        builder = (x509.CertificateBuilder().subject_name(x509.Name(attributes))
                   .issuer_name(self.certificate.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                         ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self.key, hashes.SHA256())
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_private(path, _key_pem(key) + certificate.public_bytes(serialization.Encoding.PEM)
                       + self.certificate.public_bytes(serialization.Encoding.PEM))
        return path
