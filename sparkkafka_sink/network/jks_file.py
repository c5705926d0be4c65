"""Java's JKS key store format, read (sans-I/O): the bytes of a ``.jks`` file in, its entries out.

The format is the one ``sun.security.provider.JavaKeyStore`` writes (versions 1 and 2): the
magic 0xFEEDFEED, a version, a count, then per entry a tag (1: a private key with its
certificate chain, 2: a trusted certificate), the alias (``DataOutput.writeUTF``: a two-byte
length and modified UTF-8), a timestamp in milliseconds and the DER bytes, and last a SHA-1
digest over the store password (UTF-16BE), the words "Mighty Aphrodite" and every byte before
it.  A private key is an ``EncryptedPrivateKeyInfo`` protected by Sun's key protector (OID
1.3.6.1.4.1.42.2.17.1.1): a 20-byte salt, the PKCS#8 key XORed with a SHA-1 stream of the
password and the salt, and a SHA-1 check of the password and the plain key.

Read here with the standard library, so JKS stores need no extra package and no C compiler.
Errors say what is wrong, never a password.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from dataclasses import dataclass, field

MAGIC = b"\xfe\xed\xfe\xed"
_WHITENER = b"Mighty Aphrodite"
_DIGEST_LEN = 20
#: Sun's JKS key protector, the one algorithm a JKS file's private keys are protected with
KEY_PROTECTOR_OID = "1.3.6.1.4.1.42.2.17.1.1"
_KNOWN_OIDS = {"1.3.6.1.4.1.42.2.19.1": "PBEWithMD5AndTripleDES (JCEKS)"}


class JksError(ValueError):
    """The bytes are not a readable JKS store (cut, corrupt, or another format)."""


class JksIntegrityError(JksError):
    """The store's integrity check fails with the password given (wrong password, or altered)."""


class JksKeyError(JksError):
    """A private key does not open with the password given."""


@dataclass(frozen=True)
class PrivateKeyEntry:
    """A private key, still protected, and its certificate chain (DER, leaf first)."""

    alias: str
    protected_key: bytes = field(repr=False)
    chain: tuple[bytes, ...]

    def recover(self, password: str) -> bytes:
        """The PKCS#8 DER of the key; JksKeyError when ``password`` does not open it."""
        oid, data = _encrypted_private_key_info(self.protected_key)
        if oid != KEY_PROTECTOR_OID:
            raise JksError(f"the key is protected with {_KNOWN_OIDS.get(oid, 'algorithm ' + oid)}, not JKS's key "
                           "protector")
        if len(data) < 2 * _DIGEST_LEN:
            raise JksError("the protected key is too short")
        salt, body, check = data[:_DIGEST_LEN], data[_DIGEST_LEN:-_DIGEST_LEN], data[-_DIGEST_LEN:]
        secret = _utf16be(password)
        stream = bytearray()
        digest = salt
        while len(stream) < len(body):
            digest = hashlib.sha1(secret + digest).digest()
            stream += digest
        plain = (int.from_bytes(body, "big") ^ int.from_bytes(stream[:len(body)], "big")).to_bytes(len(body), "big")
        if not hmac.compare_digest(hashlib.sha1(secret + plain).digest(), check):
            raise JksKeyError("the password does not open the key")
        return plain


@dataclass(frozen=True)
class JksStore:
    """A JKS store's entries by alias."""

    private_keys: dict[str, PrivateKeyEntry]
    certificates: dict[str, bytes]


def load(data: bytes, password: str | None) -> JksStore:
    """Parse a JKS store; with a password, check its integrity as Java does (JksIntegrityError
    when it fails); without one, read the entries unchecked (``KeyStore.load(stream, null)``)."""
    reader = _Reader(data)
    if reader.take(4) != MAGIC:
        raise JksError("it does not start with the JKS magic number")
    version = reader.int32()
    if version not in (1, 2):
        raise JksError(f"unknown JKS version {version}")
    private_keys: dict[str, PrivateKeyEntry] = {}
    certificates: dict[str, bytes] = {}
    for _ in range(reader.int32()):
        tag = reader.int32()
        if tag not in (1, 2):
            raise JksError(f"unknown entry tag {tag}")
        alias = reader.utf()
        reader.take(8)  # the entry's date
        if tag == 1:
            protected = reader.take(reader.int32())
            chain = []
            for _ in range(reader.int32()):
                if version == 2:
                    reader.utf()  # the certificate type: X.509
                chain.append(reader.take(reader.int32()))
            private_keys[alias] = PrivateKeyEntry(alias, protected, tuple(chain))
        else:
            if version == 2:
                reader.utf()
            certificates[alias] = reader.take(reader.int32())
    if password is not None:
        end = reader.pos
        expected = hashlib.sha1(_utf16be(password) + _WHITENER + data[:end]).digest()
        if not hmac.compare_digest(reader.take(_DIGEST_LEN), expected):
            raise JksIntegrityError("the store's integrity check fails: wrong password, or the file was altered")
    return JksStore(private_keys, certificates)


def _utf16be(password: str) -> bytes:
    """Java's ``char[]`` of the password, two bytes a char, big-endian (as the JKS digests take it)."""
    return password.encode("utf-16-be", "surrogatepass")


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise JksError("the file ends early (cut or not a JKS store)")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def utf(self) -> str:
        """``DataInput.readUTF``: modified UTF-8 (NUL as C0 80, supplementary characters as surrogate pairs)."""
        raw = self.take(struct.unpack(">H", self.take(2))[0]).replace(b"\xc0\x80", b"\x00")
        try:
            return raw.decode("utf-8", "surrogatepass").encode("utf-16", "surrogatepass").decode("utf-16")
        except UnicodeError as e:
            raise JksError(f"an alias is not modified UTF-8: {e}") from None


def _encrypted_private_key_info(der: bytes) -> tuple[str, bytes]:
    """(algorithm OID, encrypted data) of a DER ``EncryptedPrivateKeyInfo``."""
    outer, _ = _tlv(der, 0, 0x30)
    algorithm, after = _tlv(outer, 0, 0x30)
    oid, _ = _tlv(algorithm, 0, 0x06)
    data, _ = _tlv(outer, after, 0x04)
    return _oid(oid), data


def _tlv(der: bytes, pos: int, tag: int) -> tuple[bytes, int]:
    """The content of the DER element of ``tag`` at ``pos``, and the position after it."""
    if pos + 2 > len(der) or der[pos] != tag:
        raise JksError("the protected key is not DER EncryptedPrivateKeyInfo")
    length, pos = der[pos + 1], pos + 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or pos + count > len(der):
            raise JksError("the protected key is not DER EncryptedPrivateKeyInfo")
        length, pos = int.from_bytes(der[pos:pos + count], "big"), pos + count
    if pos + length > len(der):
        raise JksError("the protected key is cut")
    return der[pos:pos + length], pos + length


def _oid(body: bytes) -> str:
    values, value = [], 0
    for byte in body:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            values.append(value)
            value = 0
    if not values:
        raise JksError("the protected key's algorithm has an empty OID")
    first = min(values[0] // 40, 2)
    return ".".join(str(v) for v in (first, values[0] - 40 * first, *values[1:]))
