"""Transactions (KIP-98), pure: the transaction coordinator's core (`coordinator`), the records it
keeps in `__transaction_state` (`state_log`), a partition's transaction state and markers. The
shell is the broker's (weir/broker/txn_*.py)."""
