"""What the `weir` admin commands share: their options, how they run, their errors and argument formats.

`--bootstrap-server` (default 127.0.0.1:9092) may be given before or after a command's action. A
Kafka error or an unreachable broker prints one readable line on stderr and exits with status 1;
never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from weir.client import ClientError, ClusterClient, ErrorCode, KafkaError

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

DYNAMIC_SOURCES = {1, 2, 3, 6}


class UsageError(Exception):
    """Bad arguments found after parsing (exit status 1 with a message)."""


def error_text(e: BaseException) -> str:
    if isinstance(e, KafkaError):
        name = e.code.name.upper()
        return f"{name}: {e.message}" if e.message and e.message != e.code.name else name
    return str(e)


def raise_for(code, message: str | None, context: str) -> None:
    """KafkaError with `context` in the message unless `code` is NONE."""
    if ErrorCode(code) != ErrorCode.none:
        raise KafkaError(ErrorCode(code), message or context)


def is_default(entry) -> bool:
    """Whether a DescribeConfigs entry is a default rather than a dynamic override."""
    source = getattr(entry, "config_source", None)
    if source is not None and source >= 0:
        return source not in DYNAMIC_SOURCES
    return bool(getattr(entry, "is_default", False))


# -- arguments ---------------------------------------------------------------------

def parse_key_values(items: list[str] | None) -> dict[str, str]:
    """["k=v", "k2=v2,k3=[a,b]"] -> dict; commas inside [...] stay in the value."""
    out: dict[str, str] = {}
    for item in items or []:
        for part in _split_top_level(item):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                raise UsageError(f"bad config {part!r}: expected key=value")
            value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            out[key.strip()] = value
    return out


def parse_names(items: list[str] | None) -> list[str]:
    """["a,b", "c"] (a repeatable option of comma-separated names) -> ["a", "b", "c"]."""
    return [n for item in items or [] for n in _split_top_level(item)]


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p for p in (p.strip() for p in parts) if p]


def common_options(parser: argparse.ArgumentParser, suppress: bool) -> None:
    default = argparse.SUPPRESS
    parser.add_argument("--bootstrap-server", metavar="HOST:PORT[,HOST:PORT]",
                        default=default if suppress else DEFAULT_BOOTSTRAP,
                        help=f"brokers to bootstrap from (default {DEFAULT_BOOTSTRAP})")
    parser.add_argument("--timeout", type=float, metavar="SECONDS", default=default if suppress else 30.0,
                        help="request timeout in seconds (default 30)")
    parser.add_argument("--command-config", metavar="FILE", default=default if suppress else None,
                        help="Kafka client properties: security.protocol, sasl.*, ssl.* (a secured cluster)")


# -- running and output -------------------------------------------------------------

def run_command(command, args) -> int:
    async def go():
        from weir.security.client_config import load_command_config
        security = load_command_config(getattr(args, "command_config", None))
        client = ClusterClient(args.bootstrap_server, client_id="weir-admin", timeout_s=args.timeout,
                               retries=3, **({"security": security} if security else {}))
        try:
            return await command(client, args)
        finally:
            await client.close()
    try:
        return asyncio.run(go()) or 0
    except (KafkaError, ClientError, UsageError, ValueError) as e:
        print(f"Error: {error_text(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `weir topics list | head`
        sys.stdout = open(os.devnull, "w")
        return 1


def table(header: list[str], rows: list[list]) -> None:
    widths = [max(len(str(v)) for v in column) + 2 for column in zip(header, *rows)]
    print()
    for row in [header, *rows]:
        print("".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
