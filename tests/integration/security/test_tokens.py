"""Bearer tokens checked against a JWKS served on a loopback port, as an issuer serves it."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from headwater_kernel.clock import ManualClock
from headwater_kernel.security.principals import Principal
from headwater_kernel.security.tokens import (
    InvalidTokenError,
    KeySetUnavailableError,
    TokenSettings,
    TokenVerifier,
)

pytestmark = pytest.mark.anyio

ISSUER, AUDIENCE = "https://issuer.test", "headwater"


class Issuer:
    """An identity provider's JWKS endpoint: keys that can be rotated, requests counted."""

    def __init__(self) -> None:
        self.keys: dict[str, Any] = {}  # kid -> private key
        self.published: list[dict[str, Any]] = []
        self.requests = 0
        self.down = False
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                issuer.requests += 1
                if issuer.down:
                    self.send_response(503)
                    self.end_headers()
                    return
                body = json.dumps({"keys": issuer.published}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def add_key(self, kid: str, kind: str = "RSA", publish: bool = True) -> None:
        key: Any = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if kind == "RSA"
            else ec.generate_private_key(ec.SECP256R1())
        )
        self.keys[kid] = key
        if publish:
            algorithm = jwt.get_algorithm_by_name("RS256" if kind == "RSA" else "ES256")
            jwk = json.loads(algorithm.to_jwk(key.public_key()))
            self.published.append({**jwk, "kid": kid, "use": "sig"})

    def token(
        self,
        kid: str,
        algorithm: str = "RS256",
        signer: str | None = None,
        claims: dict[str, Any] | None = None,
        **more: Any,
    ) -> str:
        """A token signed by ``signer``'s key (``kid``'s by default), with ``claims`` and
        ``more`` over valid defaults (None removes a claim)."""
        now = int(time.time())
        body = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 300}
        body.update(claims or {})
        body.update(more)
        return jwt.encode(
            {k: v for k, v in body.items() if v is not None},
            self.keys[signer or kid],
            algorithm=algorithm,
            headers={"kid": kid},
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    served = Issuer()
    served.add_key("k1")
    yield served
    served.close()


def verifier(issuer: Issuer, clock: ManualClock | None = None) -> TokenVerifier:
    settings = TokenSettings(jwks_url=issuer.url, issuer=ISSUER, audience=AUDIENCE)
    return TokenVerifier(settings, clock=clock or ManualClock())


async def test_a_valid_token_names_its_subject(issuer: Issuer) -> None:
    issuer.add_key("ec1", "EC")
    check = verifier(issuer)
    assert await check.principal(issuer.token("k1")) == Principal.user("alice")
    assert await check.principal(issuer.token("ec1", "ES256", sub="bob")) == Principal.user("bob")
    assert issuer.requests == 1  # the key set is fetched once, then kept
    await check.close()


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp": -120}, "expired"),
        ({"aud": "someone-else"}, "another audience"),
        ({"iss": "https://evil.test"}, "another issuer"),
        ({"exp": None}, "'exp' claim"),
        ({"sub": None}, "'sub' claim"),
        ({"nbf": 600}, "not valid"),
    ],
)
async def test_claims_that_do_not_hold_are_refused(
    issuer: Issuer, claims: dict[str, Any], reason: str
) -> None:
    """Times in ``claims`` are seconds from now, taken when the test runs."""
    now = int(time.time())
    timed = {
        k: now + v if k in ("exp", "nbf") and isinstance(v, int) else v for k, v in claims.items()
    }
    check = verifier(issuer)
    token = issuer.token("k1", claims=timed)
    with pytest.raises(InvalidTokenError, match=reason) as refused:
        await check.principal(token)
    assert token not in str(refused.value)
    await check.close()


async def test_a_signature_by_another_key_is_refused(issuer: Issuer) -> None:
    issuer.add_key("rogue", publish=False)
    check = verifier(issuer)
    with pytest.raises(InvalidTokenError, match="signature does not verify"):
        await check.principal(issuer.token("k1", signer="rogue"))
    await check.close()


async def test_none_and_hmac_tokens_are_refused_before_any_key(issuer: Issuer) -> None:
    check = verifier(issuer)
    unsigned = jwt.encode({"sub": "alice"}, "", algorithm="none", headers={"kid": "k1"})
    with pytest.raises(InvalidTokenError, match="'none' are not accepted"):
        await check.principal(unsigned)
    # The classic confusion: the issuer's public key used as an HMAC secret.
    public = (
        issuer.keys["k1"]
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    forged = _hs256(public, {"alg": "HS256", "typ": "JWT", "kid": "k1"}, {"sub": "alice"})
    with pytest.raises(InvalidTokenError, match="'HS256' are not accepted"):
        await check.principal(forged)
    with pytest.raises(InvalidTokenError, match="not a JWT"):
        await check.principal("not-a-token")
    assert issuer.requests == 0
    with pytest.raises(ValueError, match="asymmetric"):
        TokenSettings(
            jwks_url=issuer.url, issuer=ISSUER, audience=AUDIENCE, algorithms=frozenset({"HS256"})
        )
    await check.close()


async def test_a_key_of_the_wrong_type_for_the_algorithm_is_refused(issuer: Issuer) -> None:
    issuer.add_key("ec1", "EC")
    check = verifier(issuer)
    with pytest.raises(InvalidTokenError, match="not a key for RS256"):
        await check.principal(_relabel(issuer))
    await check.close()


def _hs256(secret: bytes, header: dict[str, str], claims: dict[str, str]) -> str:
    """A JWT signed with HMAC-SHA256 by hand (PyJWT refuses a public key as the secret)."""

    def part(value: dict[str, str]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    signed = f"{part(header)}.{part(claims)}"
    mac = hmac.new(secret, signed.encode(), hashlib.sha256).digest()
    return f"{signed}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def _relabel(issuer: Issuer) -> str:
    """An RS256 token whose kid names the EC key."""
    return issuer.token("ec1", "RS256", signer="k1")


async def test_rotation_fetches_new_keys_at_most_once_per_interval(issuer: Issuer) -> None:
    clock = ManualClock()
    check = verifier(issuer, clock)
    assert await check.principal(issuer.token("k1"))
    issuer.add_key("k2")  # the issuer rotates
    clock.advance(11)
    assert await check.principal(issuer.token("k2")) == Principal.user("alice")
    assert issuer.requests == 2
    # Made-up key ids cannot make the service hammer the issuer: one fetch per 10 s at most.
    for _ in range(20):
        with pytest.raises(InvalidTokenError, match="not one of the issuer's keys"):
            await check.principal(_unknown(issuer))
    assert issuer.requests == 2
    clock.advance(11)
    with pytest.raises(InvalidTokenError, match="not one of the issuer's keys"):
        await check.principal(_unknown(issuer))
    assert issuer.requests == 3
    await check.close()


def _unknown(issuer: Issuer) -> str:
    return issuer.token("nope", signer="k1")


async def test_an_issuer_down_at_first_is_an_outage_then_old_keys_serve(issuer: Issuer) -> None:
    clock = ManualClock()
    check = verifier(issuer, clock)
    issuer.down = True
    with pytest.raises(KeySetUnavailableError, match="unavailable"):
        await check.principal(issuer.token("k1"))
    issuer.down = False
    assert await check.principal(issuer.token("k1"))
    issuer.down = True
    clock.advance(301)  # due for a refresh, which fails: the keys it has still verify
    assert await check.principal(issuer.token("k1")) == Principal.user("alice")
    await check.close()
