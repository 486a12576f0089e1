"""OAuth2 bearer tokens: JWTs checked against an issuer's published keys (a JWKS URL).

:class:`TokenVerifier` accepts a token only when all of these hold (PyJWT does the checking):

- its header names an asymmetric algorithm this verifier allows (RS*, PS*, ES*, EdDSA): ``none``
  and the HMAC family are refused before any key is looked at, so a public key can never be
  used as an HMAC secret;
- its ``kid`` is a key of the issuer's JWKS whose type fits that algorithm, and the signature
  verifies with it;
- ``iss`` and ``aud`` are the configured ones, ``exp`` is in the future (``nbf``/``iat`` too,
  within ``leeway_s``), and the principal claim (``sub`` by default) is present.

Keys rotate: the JWKS is fetched at the first token, again every ``refresh_s``, and again when a
token names a key id not in it -- but at most once per ``min_refetch_s``, so a stream of tokens
with made-up key ids cannot make this service hammer the issuer. The reasons given never
include the token.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import jwt

from headwater_kernel.clock import SYSTEM_CLOCK, Clock
from headwater_kernel.security.principals import Principal

log = logging.getLogger(__name__)

ASYMMETRIC_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


class InvalidTokenError(Exception):
    """A bearer token that is not accepted; the message says why, never what the token was."""


class KeySetUnavailableError(Exception):
    """The issuer's JWKS could not be fetched (and none was fetched before)."""


@dataclass(frozen=True)
class TokenSettings:
    jwks_url: str
    issuer: str
    audience: str
    algorithms: frozenset[str] = ASYMMETRIC_ALGORITHMS
    principal_claim: str = "sub"
    leeway_s: float = 30.0
    refresh_s: float = 300.0
    min_refetch_s: float = 10.0

    def __post_init__(self) -> None:
        weak = set(self.algorithms) - ASYMMETRIC_ALGORITHMS
        if weak:
            raise ValueError(f"only asymmetric algorithms may verify tokens, not {sorted(weak)}")


class TokenVerifier:
    """Verifies bearer tokens for one issuer and audience (see the module docstring)."""

    def __init__(
        self,
        settings: TokenSettings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        verify: Any = True,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        self._client = httpx.AsyncClient(transport=transport, verify=verify, timeout=10.0)
        self._clock = clock
        self._keys: dict[str, _IssuerKey] = {}
        self._fetched_at: float | None = None
        self._lock = asyncio.Lock()

    async def close(self) -> None:
        await self._client.aclose()

    async def principal(self, token: str) -> Principal:
        """The user the token was issued for; InvalidTokenError when it is not accepted."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise InvalidTokenError("the bearer token is not a JWT") from None
        algorithm = header.get("alg")
        if algorithm not in self.settings.algorithms:
            raise InvalidTokenError(f"tokens signed with {algorithm!r} are not accepted")
        kid = header.get("kid")
        if not isinstance(kid, str):
            raise InvalidTokenError("the token names no key id (kid)")
        key = await self._key(kid)
        if not key.fits(algorithm):
            raise InvalidTokenError(f"key {kid!r} is not a key for {algorithm}")
        claims = self._decode(token, key.key, algorithm)
        subject = claims.get(self.settings.principal_claim)
        if not isinstance(subject, str) or not subject:
            raise InvalidTokenError(f"the token has no {self.settings.principal_claim!r} claim")
        return Principal.user(subject)

    def _decode(self, token: str, key: jwt.PyJWK, algorithm: str) -> Mapping[str, Any]:
        s = self.settings
        try:
            claims: Mapping[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=[algorithm],
                audience=s.audience,
                issuer=s.issuer,
                leeway=s.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidTokenError("the token has expired") from None
        except jwt.InvalidAudienceError:
            raise InvalidTokenError("the token is for another audience") from None
        except jwt.InvalidIssuerError:
            raise InvalidTokenError("the token is from another issuer") from None
        except jwt.InvalidSignatureError:
            raise InvalidTokenError("the token's signature does not verify") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidTokenError(f"the token has no {exc.claim!r} claim") from None
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            raise InvalidTokenError(f"the token is not valid ({type(exc).__name__})") from None
        return claims

    async def _key(self, kid: str) -> _IssuerKey:
        now = self._clock.monotonic()
        stale = self._fetched_at is None or now - self._fetched_at >= self.settings.refresh_s
        if stale or (
            kid not in self._keys and now - (self._fetched_at or 0.0) >= self.settings.min_refetch_s
        ):
            await self._refresh(now)
        key = self._keys.get(kid)
        if key is None:
            raise InvalidTokenError(f"the token's key id {kid!r} is not one of the issuer's keys")
        return key

    async def _refresh(self, wanted_at: float) -> None:
        async with self._lock:
            if self._fetched_at is not None and self._fetched_at >= wanted_at:
                return  # another request refreshed meanwhile
            try:
                answer = await self._client.get(self.settings.jwks_url)
                answer.raise_for_status()
                keys = _issuer_keys(answer.json())
            except (httpx.HTTPError, ValueError) as exc:
                if self._fetched_at is None:
                    raise KeySetUnavailableError(
                        f"the issuer's keys at {self.settings.jwks_url} are unavailable: "
                        f"{type(exc).__name__}"
                    ) from None
                log.warning("keeping the issuer's previous keys: refresh failed: %s", exc)
                self._fetched_at = self._clock.monotonic()  # wait min_refetch_s before trying again
                return
            self._keys = keys
            self._fetched_at = self._clock.monotonic()


# The key types each family of algorithms is verified with (JWK "kty").
_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}


@dataclass(frozen=True)
class _IssuerKey:
    key: jwt.PyJWK
    named_algorithm: str | None  # the JWK's "alg", when it names one

    def fits(self, algorithm: str) -> bool:
        """Whether this key may verify ``algorithm``: its type fits the family, and a key that
        names its algorithm names this one."""
        if self.named_algorithm is not None and self.named_algorithm != algorithm:
            return False
        return self.key.key_type == _KEY_TYPES.get(algorithm[:2])


def _issuer_keys(document: Any) -> dict[str, _IssuerKey]:
    """The signing keys of a JWKS document by key id; keys without an id, for encryption, or of
    a type PyJWT cannot use are left out."""
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ValueError("not a JWKS document (no 'keys' list)")
    keys: dict[str, _IssuerKey] = {}
    for member in document["keys"]:
        if not isinstance(member, dict) or member.get("use", "sig") != "sig":
            continue
        kid, named = member.get("kid"), member.get("alg")
        if not isinstance(kid, str):
            continue
        try:
            keys[kid] = _IssuerKey(jwt.PyJWK(member), named if isinstance(named, str) else None)
        except jwt.PyJWTError:
            continue
    return keys
