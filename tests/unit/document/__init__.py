"""Unit tests of the result document writer and the value encoders (contract §5)."""
