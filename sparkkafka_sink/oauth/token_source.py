"""TokenSource: the current OAUTHBEARER token of one provider, kept fresh in the background.

It fetches the first token synchronously and then refreshes it on a daemon thread once
``refresh_window_factor`` of its lifetime has passed, so the network thread only ever reads a
ready token (Kafka's ExpiringCredentialRefreshingLogin).  Tokens never reach a log line, a repr
or an error.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from sparkkafka_sink.config_def import ConfigKey, value_of
from sparkkafka_sink.errors import AuthenticationError, Message
from sparkkafka_sink.oauth.bearer_token import (
    OAuthBearerToken,
    TokenProvider,
    TokenUnavailableError,
    coerce_token,
)

log = logging.getLogger(__name__)


#: never refresh sooner than this after a fetch (Kafka's sasl.login.refresh.min.period.seconds),
#: unless the token lives less than twice as long: an IdP that hands back a cached,
#: half-used token must not be asked again every instant
MIN_REFRESH_PERIOD_S = 60.0
#: how much of a token's lifetime passes before it is refreshed (Kafka's setting, declared here,
#: where it is honoured: the SASL keys and the producer's configuration take it from here)
REFRESH_WINDOW_FACTOR_KEY = ConfigKey[float]("sasl.login.refresh.window.factor", "number", 0.8,
                                      "refresh an OAUTHBEARER token once this fraction of its lifetime has passed",
                                      minimum=0.5, maximum=1.0)
RETRY_BACKOFF_S = 0.1
RETRY_BACKOFF_MAX_S = 10.0
_MAX_WAIT_S = 30.0   # re-read the wall clock at least this often (suspend, clock steps)


def refresh_at(token: OAuthBearerToken, fetched_at_s: float, refresh_window_factor: float,
               jitter: float = 0.0, *, min_period_s: float = MIN_REFRESH_PERIOD_S, buffer_s: float = 0.0) -> float:
    """When to refresh (epoch seconds): ``refresh_window_factor`` (+ ``jitter``) of the token's
    lifetime, counted from its ``iat`` when that is not in our future, else from the fetch; no
    later than ``buffer_s`` before it expires (sasl.login.refresh.buffer.seconds) and no sooner
    than ``min_period_s`` after the fetch (sasl.login.refresh.min.period.seconds) when what is
    left of the token holds both, as Kafka's ExpiringCredentialRefreshingLogin; a token too short
    for them keeps the window and at most half of what is left."""
    expires_s = token.expires_at_ms / 1000
    start_s = fetched_at_s
    if token.issued_at_ms is not None and token.issued_at_ms / 1000 <= fetched_at_s:
        start_s = token.issued_at_ms / 1000
    pct = refresh_window_factor + jitter
    if pct > 1.0:
        pct = refresh_window_factor
    due = start_s + (expires_s - start_s) * pct
    remaining = max(0.0, expires_s - fetched_at_s)
    if min_period_s + buffer_s <= remaining:
        due = min(due, expires_s - buffer_s)
    floor = fetched_at_s + min(min_period_s, remaining / 2)
    return max(due, floor)


def _callable_name(fn: Any) -> str:
    module = getattr(fn, "__module__", None)
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{name}" if module else name


class TokenSource:
    """The current token of one provider, refreshed in the background.

    ``current()`` fetches the first token synchronously (errors propagate: bad credentials fail
    the caller), then returns the latest token at once; a daemon thread refetches it at
    :func:`refresh_at` and, when that fails, retries with backoff (0.1 s doubling to 10 s,
    sooner while the old token still has little time) -- the old token is served meanwhile.
    Once it has expired ``current()`` raises :class:`TokenUnavailableError` with the last error.
    """

    def __init__(self, provider: TokenProvider, refresh_window_factor: float = 0.8,
                 clock: Callable[[], float] = time.time, *, jitter: float = 0.05,
                 description: str | None = None, min_refresh_period_s: float = MIN_REFRESH_PERIOD_S,
                 refresh_buffer_s: float = 0.0):
        value_of(REFRESH_WINDOW_FACTOR_KEY, refresh_window_factor)  # its bounds, as the setting's
        self._provider = provider
        self.refresh_window_factor = refresh_window_factor
        self.jitter = jitter
        self.min_refresh_period_s = min_refresh_period_s
        self.refresh_buffer_s = refresh_buffer_s
        self._clock = clock
        self.description = description or getattr(provider, "description", None) or \
            f"token provider {_callable_name(provider)}"
        self._cond = threading.Condition()
        self._fetch_lock = threading.Lock()
        self._token: OAuthBearerToken | None = None
        self._fetched_at = 0.0
        self._thread: threading.Thread | None = None
        self._closed = False
        self._refresh_requested = False
        #: the latest failed fetch (cleared by a success), for messages
        self.last_error: BaseException | None = None
        self.fetches = 0            # successful provider calls (the first one included)
        self.refreshes = 0          # successful background refreshes
        self.refresh_failures = 0

    def __repr__(self) -> str:
        return f"TokenSource({self.description}, principal={self.principal!r})"

    @property
    def principal(self) -> str | None:
        token = self._token
        return token.principal if token is not None else getattr(self._provider, "principal", None)

    @property
    def token_expires_at_ms(self) -> int | None:
        token = self._token
        return token.expires_at_ms if token is not None else None

    def current(self) -> OAuthBearerToken:
        """A token that has not expired; the first call blocks on the provider."""
        token = self._token
        if token is None:
            with self._fetch_lock:                             # one first fetch for all callers
                if self._closed:
                    raise AuthenticationError(f"the OAUTHBEARER {self.description} is closed")
                if self._token is None:
                    fetched_at = self._clock()
                    token = self._fetch()
                    with self._cond:
                        self._token, self._fetched_at = token, fetched_at
                        self._start_refresher()
                token = self._token
            assert token is not None
        if self._clock() * 1000 >= token.expires_at_ms:
            error = self.last_error
            raise TokenUnavailableError(Message(
                "the OAUTHBEARER token of {!r} from {} expired and no new one could be fetched{}", token.principal,
                self.description, Message(": {}", error) if error else " yet"))
        return token

    def refresh_now(self) -> None:
        """Ask the refresher to fetch a new token now (e.g. the broker called ours invalid)."""
        with self._cond:
            self._refresh_requested = True
            self._cond.notify_all()

    def wait_for_refreshes(self, count: int, timeout: float) -> bool:
        """Block until ``refreshes >= count`` or ``timeout`` seconds pass (tests, diagnostics)."""
        with self._cond:
            return self._cond.wait_for(lambda: self.refreshes >= count or self._closed, timeout) \
                and self.refreshes >= count

    def close(self) -> None:
        """Stop the refresher (it may be inside a provider call: it exits when that returns)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1.0)

    # -- internals ---------------------------------------------------------------------
    def _fetch(self) -> OAuthBearerToken:
        try:
            token = coerce_token(self._provider(), self.description)
        except AuthenticationError as e:
            self.last_error = e
            raise
        except Exception as e:  # a user callable
            self.last_error = e
            raise TokenUnavailableError(Message("the {} failed: {}: {}", self.description, type(e).__name__, e)) from e
        if token.expires_at_ms <= self._clock() * 1000:
            self.last_error = AuthenticationError(f"the {self.description} returned an expired token")
            raise AuthenticationError(
                f"the {self.description} returned a token that expired at {token.expires_at_ms} ms "
                "since the epoch (check this host's clock)")
        self.fetches += 1
        self.last_error = None
        return token

    def _start_refresher(self) -> None:
        self._thread = threading.Thread(target=self._run, name="sasl-token-refresh", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        failures = 0
        retry_at = 0.0
        while True:
            with self._cond:
                assert self._token is not None
                if failures:
                    due = retry_at
                else:
                    due = refresh_at(self._token, self._fetched_at, self.refresh_window_factor,
                                     random.uniform(0, self.jitter), min_period_s=self.min_refresh_period_s,
                                     buffer_s=self.refresh_buffer_s)
                    log.info("OAUTHBEARER token of %r expires at %.3f; refreshing at %.3f",
                             self._token.principal, self._token.expires_at_ms / 1000, due)
                while not self._closed and not self._refresh_requested and self._clock() < due:
                    self._cond.wait(timeout=min(max(due - self._clock(), 0.001), _MAX_WAIT_S))
                if self._closed:
                    return
                self._refresh_requested = False
            fetched_at = self._clock()
            try:
                with self._fetch_lock:
                    token = self._fetch()
            except Exception as e:  # noqa: BLE001 - retried below
                failures += 1
                delay = self._retry_delay(failures)
                retry_at = self._clock() + delay
                with self._cond:
                    self.refresh_failures += 1
                log.warning("Refreshing the OAUTHBEARER token from %s failed (%s); retry %d in %.1f s",
                            self.description, e, failures, delay)
                continue
            with self._cond:
                self._token, self._fetched_at = token, fetched_at
                self.refreshes += 1
                failures = 0
                self._cond.notify_all()

    def _retry_delay(self, failures: int) -> float:
        delay = RETRY_BACKOFF_S * 2 ** min(failures - 1, 20)
        token = self._token
        remaining = token.expires_at_ms / 1000 - self._clock() if token is not None else 0.0
        cap = RETRY_BACKOFF_MAX_S if remaining <= 0 else \
            min(RETRY_BACKOFF_MAX_S, max(RETRY_BACKOFF_S, remaining / 2))
        return min(delay, cap)
