"""What an HTTP client is configured with, checked before any request: a
base URL a request line can carry and header values a header can carry
(`jevmem.system_two.ChatCompletionsClient` refuses anything else when it is
made, not at its first call)."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from jevmem.errors import InvalidConfigError

__all__ = ["header_safe", "url_parts"]


def url_parts(base: str) -> tuple[SplitResult, str, int | None]:
    """``base`` split, with its host and port, or InvalidConfigError: an http(s)
    URL with a host, a port in range and a path a request line can carry."""
    try:
        parts = urlsplit(base)
        port = parts.port
    except ValueError as exc:  # a bad port or an unclosed IPv6 bracket
        raise InvalidConfigError(f"base_url is not a URL ({exc}): {base!r:.80}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidConfigError(f"base_url must be an http:// or https:// URL, got {base!r:.80}")
    rest = parts.path + parts.query
    if not rest.isascii() or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in rest):
        raise InvalidConfigError(
            f"base_url's path must be ASCII without spaces (percent-encode it), got {base!r:.80}"
        )
    return parts, parts.hostname, port


def header_safe(value: str) -> bool:
    """Whether an HTTP header can carry ``value`` as it is: ASCII without
    control characters (a tab is allowed)."""
    return value.isascii() and not any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in value)
