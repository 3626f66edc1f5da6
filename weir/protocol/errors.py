"""Kafka error codes (kio's table) and the exception that carries one."""

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "error_code", "wire_message"]

# Kafka's strings, legacy (int16 length) and compact alike, hold at most 0x7fff bytes: its
# generated serializers refuse a longer one, and its parsers a longer length.
MAX_STRING_BYTES = 0x7FFF
CUT_MARK = "..."


class KafkaError(Exception):
    """A request-level failure answered to the client with `code`; a produce refused for some of
    its records lists them as (index in the batch, reason) in `record_errors`."""

    def __init__(self, code: ErrorCode, message: str | None = None,
                 record_errors: list[tuple[int, str]] = ()) -> None:
        super().__init__(message or code.name)
        self.code = code
        self.message = message
        self.record_errors = record_errors


def error_code(number: int) -> ErrorCode:
    """The ErrorCode a peer answered; a number kio does not know is UNKNOWN_SERVER_ERROR."""
    try:
        return ErrorCode(number)
    except ValueError:
        return ErrorCode.unknown_server_error


def wire_message(message: str | None) -> str | None:
    """An error message as a response carries it: cut to fit a Kafka string, at a character
    boundary, and marked as cut (a message may quote a name of the request, itself up to the limit)."""
    if message is None:
        return None
    raw = message.encode()
    if len(raw) <= MAX_STRING_BYTES:
        return message
    return raw[:MAX_STRING_BYTES - len(CUT_MARK)].decode(errors="ignore") + CUT_MARK
