"""Kafka error codes (kio's table) and the exception that carries one."""

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "KafkaError", "error_code"]


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
