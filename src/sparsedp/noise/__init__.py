"""Randomness: a CSPRNG source and exact discrete noise samplers."""

from .source import InsecureSeededRandom, SecureRandom, default_source

__all__ = ["InsecureSeededRandom", "SecureRandom", "default_source"]
