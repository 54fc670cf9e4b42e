"""The transaction coordinator (``__transaction_state``, markers, the state machine)."""
