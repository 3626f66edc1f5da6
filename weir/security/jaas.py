"""The JAAS login config Kafka takes in `listener.name.<listener>.<mechanism>.sasl.jaas.config`:

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

`username`/`password` are what this broker logs in with to its peers (inter-broker); for PLAIN,
each `user_<name>="<password>"` is a user the listener accepts. Only the option syntax is read:
`key="value"` or `key=value`, separated by white space, up to the `;`.
"""

import re

_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


class JaasError(ValueError):
    pass


def parse_jaas(text: str) -> dict[str, str]:
    """The options of one login module entry."""
    text = text.strip()
    head = re.match(r"\s*[A-Za-z0-9_.$]+\s+(required|requisite|sufficient|optional)\b", text)
    if not head:
        raise JaasError(f"sasl.jaas.config: expected '<LoginModule> required key=\"value\" ...;', got {text[:60]!r}")
    body = text[head.end():].rstrip().rstrip(";")
    options = {}
    position = 0
    for match in _OPTION.finditer(body):
        if body[position:match.start()].strip():
            raise JaasError(f"sasl.jaas.config: cannot read {body[position:match.start()].strip()[:40]!r}")
        value = match.group(2) if match.group(2) is not None else match.group(3)
        options[match.group(1)] = re.sub(r"\\(.)", r"\1", value)
        position = match.end()
    if body[position:].strip():
        raise JaasError(f"sasl.jaas.config: cannot read {body[position:].strip()[:40]!r}")
    return options


def plain_users(options: dict[str, str]) -> dict[str, str]:
    """PlainLoginModule's users: user_<name>="<password>"."""
    return {key[5:]: value for key, value in options.items() if key.startswith("user_") and len(key) > 5}
