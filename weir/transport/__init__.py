"""Bytes over sockets: the framed Kafka transport and the HTTP server of metrics and the console."""
