"""Transactions (KIP-98): the transaction coordinator's pure core (`coordinator`) and the
records it keeps in `__transaction_state` (`state_log`). Not wired into the broker yet."""
